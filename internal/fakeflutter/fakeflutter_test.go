package fakeflutter

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// This file holds the helpers the test files share, and the tests of usage, devices, doctor.

// TestMain lets the test binary act as the fake flutter when re-executed
// through Install (see the package comment).
func TestMain(m *testing.M) {
	if os.Getenv("FLY_TEST_HELPER") == "flutter" {
		os.Exit(Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const testAppID = "3c0f5c1e-5b6a-4f2e-9a57-2f8d3b1c9e10"

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// msg is one decoded protocol line.
type msg struct {
	Event  string          `json:"event"`
	Params map[string]any  `json:"params"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Trace  string          `json:"trace"`
}

func decode(line string) (msg, bool) {
	var m msg
	if !strings.HasPrefix(line, "[{") || !strings.HasSuffix(line, "}]") {
		return m, false
	}
	if err := json.Unmarshal([]byte(line[1:len(line)-1]), &m); err != nil {
		return m, false
	}
	return m, true
}

func index(lines []string, match func(string) bool) int {
	for i, l := range lines {
		if match(l) {
			return i
		}
	}
	return -1
}

func mustMain(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, getenv(vars), nil, &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"build", "android"}, "Could not find a subcommand named \"android\" for \"flutter build\".\n\n" +
			"Run 'flutter -h' (or 'flutter <command> -h') for available flutter commands and options.\n"},
		{[]string{"frobnicate"}, "Could not find a command named \"frobnicate\".\n\n" +
			"Run 'flutter -h' (or 'flutter <command> -h') for available flutter commands and options.\n"},
		{[]string{"build"}, ""},
		{[]string{"create"}, ""},
		{[]string{"run", "--machine", "-d"}, "Option -d requires an argument.\n\n" + usageHint + "\n"},
	}
	for _, tt := range tests {
		stdout, stderr, code := mustMain(t, nil, tt.args...)
		if code != ExitUsage || stdout != "" || (tt.stderr != "" && stderr != tt.stderr) || stderr == "" {
			t.Errorf("flutter %v = %d, stdout %q, stderr %q; want 64 and %q", tt.args, code, stdout, stderr, tt.stderr)
		}
	}
}

func TestBadSteering(t *testing.T) {
	for _, kv := range [][2]string{{EnvLines, "lots"}, {EnvTickMS, "-1"}, {EnvBuildFail, "maybe"}} {
		_, stderr, code := mustMain(t, map[string]string{kv[0]: kv[1]}, "doctor")
		if code != 2 || !strings.Contains(stderr, kv[0]) {
			t.Errorf("%s=%s: code %d stderr %q, want 2 naming the variable", kv[0], kv[1], code, stderr)
		}
	}
}

func TestDevices(t *testing.T) {
	stdout, _, code := mustMain(t, nil, "devices", "--machine")
	var ds []struct {
		Name, ID, TargetPlatform, SDK string
		IsSupported, Emulator         bool
		Capabilities                  map[string]bool
	}
	if err := json.Unmarshal([]byte(stdout), &ds); err != nil || code != 0 {
		t.Fatalf("devices --machine = %d, %v:\n%s", code, err, stdout)
	}
	platforms := map[string]bool{}
	for _, d := range ds {
		platforms[d.TargetPlatform] = true
		if d.Name == "" || d.ID == "" || !d.IsSupported || len(d.Capabilities) != 7 {
			t.Errorf("device %+v is incomplete", d)
		}
		if d.TargetPlatform == "android-x64" && !d.Emulator {
			t.Errorf("the android device is not an emulator")
		}
	}
	if len(ds) != 3 || !platforms["linux-x64"] || !platforms["web-javascript"] || !platforms["android-x64"] {
		t.Errorf("devices = %+v, want linux, web and an emulator", ds)
	}
	if !strings.HasPrefix(stdout, "[\n  {\n    \"name\": ") {
		t.Errorf("devices --machine is not pretty-printed:\n%s", stdout)
	}
	if stdout, _, _ := mustMain(t, map[string]string{EnvNoDevices: "1"}, "devices", "--machine"); stdout != "[]\n" {
		t.Errorf("no devices = %q, want []", stdout)
	}
	if stdout, _, _ := mustMain(t, nil, "devices"); !strings.HasPrefix(stdout, "Found 3 connected devices:\n") {
		t.Errorf("devices = %q", stdout)
	}
}

func TestDoctorAndVersion(t *testing.T) {
	stdout, _, code := mustMain(t, nil, "doctor")
	if code != 0 || !strings.HasPrefix(stdout, "Doctor summary") || !strings.Contains(stdout, "• No issues found!") {
		t.Errorf("doctor = %d:\n%s", code, stdout)
	}
	stdout, _, code = mustMain(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "Flutter "+FlutterVersion+" • channel stable • ") {
		t.Errorf("--version = %d:\n%s", code, stdout)
	}
	stdout, _, _ = mustMain(t, nil, "--version", "--machine")
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v["frameworkVersion"] != FlutterVersion {
		t.Errorf("--version --machine = %s (%v)", stdout, err)
	}
}
