package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wine"
	"golang.org/x/sys/windows/registry"
)

// This file tests the Run key platform against the real registry (a
// scratch key under HKCU, never the Run key itself) and a real flyd.exe.

// scratchKey is a new key under HKCU\Software for one test, removed after
// it.
func scratchKey(t *testing.T) hkcuKey {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	path := `Software\fly-test-` + hex.EncodeToString(b[:])
	k := hkcuKey{path: path, approved: path + `\StartupApproved`}
	t.Cleanup(func() {
		for _, p := range []string{k.approved, k.path} {
			if err := registry.DeleteKey(registry.CURRENT_USER, p); err != nil && !errors.Is(err, registry.ErrNotExist) {
				t.Errorf(`remove HKCU\%s: %v`, p, err)
			}
		}
	})
	return k
}

func TestHKCUKey(t *testing.T) {
	k := scratchKey(t)
	if _, err := k.get("fly"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("get from a key that does not exist = %v, want fs.ErrNotExist", err)
	}
	if err := k.remove("fly"); err != nil {
		t.Errorf("remove from a key that does not exist = %v, want nil", err)
	}
	line := `"C:\Program Files\fly\flyd.exe" run --no-console`
	if err := k.set("fly", line); err != nil {
		t.Fatal(err)
	}
	if got, err := k.get("fly"); got != line || err != nil {
		t.Errorf("get after set = %q, %v; want %q", got, err, line)
	}
	if _, err := k.get("other"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("get of a value that does not exist = %v, want fs.ErrNotExist", err)
	}

	// A value someone wrote as REG_EXPAND_SZ is read expanded.
	key, err := registry.OpenKey(registry.CURRENT_USER, k.path, registry.SET_VALUE)
	if err != nil {
		t.Fatal(err)
	}
	key.SetExpandStringValue("expand", `"%SystemRoot%\flyd.exe" run`)
	key.SetDWordValue("dword", 1)
	key.Close()
	if got, err := k.get("expand"); err != nil || !strings.HasPrefix(got, `"`+os.Getenv("SystemRoot")+`\flyd.exe"`) {
		t.Errorf("get of a REG_EXPAND_SZ value = %q, %v; want %%SystemRoot%% expanded", got, err)
	}
	if got, err := k.get("dword"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("get of a REG_DWORD value = %q, %v; want an error", got, err)
	}

	if err := k.remove("fly"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.get("fly"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("get after remove = %v, want fs.ErrNotExist", err)
	}

	// Task Manager's flag: absent, on (02…), off (03…).
	if off, err := k.disabled("fly"); off || err != nil {
		t.Errorf("disabled with no StartupApproved key = %v, %v; want false", off, err)
	}
	approved, _, err := registry.CreateKey(registry.CURRENT_USER, k.approved, registry.SET_VALUE)
	if err != nil {
		t.Fatal(err)
	}
	defer approved.Close()
	for _, tt := range []struct {
		data []byte
		off  bool
	}{
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false},
		{[]byte{3, 0, 0, 0, 0xd4, 0x0d, 0x43, 0x8d, 0xc8, 0x3b, 0xd9, 0x01}, true},
		{[]byte{6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false},
	} {
		approved.SetBinaryValue("fly", tt.data)
		if off, err := k.disabled("fly"); off != tt.off || err != nil {
			t.Errorf("disabled with StartupApproved % x = %v, %v; want %v", tt.data, off, err, tt.off)
		}
	}
}

// TestEndFlydRefuses: endFlyd ends nothing but a flyd.exe, and a process
// that has ended is no error.
func TestEndFlydRefuses(t *testing.T) {
	err := endFlyd(context.Background(), os.Getenv, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "not flyd; not ending it") {
		t.Errorf("endFlyd(this test's pid) = %v, want a refusal", err)
	}
	if err := endFlyd(context.Background(), os.Getenv, 0x7ffffff0); err != nil {
		t.Errorf("endFlyd(a pid that is no process) = %v, want nil", err)
	}
}

func TestCheckExecutableWindows(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"flyd.exe", "flyd", "FLYD.EXE", "flyd.cmd"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "d.exe"), 0o755)
	for _, tt := range []struct {
		name, want string // want: "" for nil, else in the error
	}{
		{"flyd.exe", ""},
		{"FLYD.EXE", ""},
		{"flyd.cmd", ""},
		{"flyd", "is not executable"},
		{"d.exe", "is a directory"},
		{"missing.exe", "no such file"},
	} {
		err := checkExecutable(filepath.Join(dir, tt.name))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkExecutable(%s) = %v, want %q", tt.name, err, tt.want)
		}
	}
	if got := pathExts(".EXE;.Bat; junk;"); !slices.Equal(got, []string{".exe", ".bat"}) {
		t.Errorf("pathExts = %q", got)
	}
}

// TestStartServiceWindows: the shim never waits on the Run key, which
// starts flyd at logon only: it starts flyd itself.
func TestStartServiceWindows(t *testing.T) {
	err := startService(context.Background(), func(k string) string { return map[string]string{"USERPROFILE": t.TempDir()}[k] })
	if err == nil || !strings.Contains(err.Error(), "at logon only") {
		t.Errorf("startService on Windows = %v, want ErrNoService: the Run key starts flyd at logon only", err)
	}
}

// TestServiceRunKeyWindows installs, stops, starts, restarts and removes
// the logon start with a real flyd.exe, in a scratch key rather than the
// Run key (nothing starts at the next logon). What only a logon can show
// (Explorer running the value, the console window --no-console closes,
// Task Manager's switch) is not tested here.
func TestServiceRunKeyWindows(t *testing.T) {
	if os.Getenv(flytest.EnvBinaries) == "" && wine.Detected() {
		t.Skipf("no Go toolchain under Wine to build flyd.exe: set %s to a directory of GOOS=windows flyd.exe and flyctl.exe", flytest.EnvBinaries)
	}
	flyd, _ := flytest.Binaries(t)
	flyd, err := filepath.Abs(flyd) // as install writes it
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := map[string]string{
		paths.EnvSocket:   filepath.Join(dir, "flyd.sock"),
		paths.EnvStateDir: filepath.Join(dir, "state"),
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	key := scratchKey(t)
	var stdout, stderr bytes.Buffer
	c := &serviceCmd{
		goos:       "windows",
		getenv:     getenv,
		geteuid:    os.Geteuid,
		executable: func() (string, error) { return filepath.Join(filepath.Dir(flyd), "flyctl.exe"), nil },
		ping:       pingDaemon(getenv),
		stdout:     &stdout,
		stderr:     &stderr,
		runKey:     key,
		startFlyd:  startDetachedFlyd,
		endFlyd:    endFlyd,
	}
	c.connect = c.connectSystem
	ctx := context.Background()
	t.Cleanup(func() {
		if pid, err := c.ping(ctx); err == nil {
			endFlyd(ctx, c.getenv, pid)
		}
	})
	step := func(args ...string) {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		if err := c.run(ctx, args); err != nil {
			t.Fatalf("flyctl service %v = %v\nstderr:\n%s", args, err, &stderr)
		}
	}
	status := func(state string) serviceStatus {
		t.Helper()
		step("status", "--json")
		var st serviceStatus
		if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != state || !strings.EqualFold(st.Flyd, flyd) || st.Command != wantCommand(st.Flyd) {
			t.Errorf("status = %+v, want %s running %s", st, state, flyd)
		}
		return st
	}
	step("install")
	if got, err := key.get("fly"); err != nil || !strings.EqualFold(got, wantCommand(flyd)) {
		t.Errorf("the value after install = %q, %v; want %q", got, err, wantCommand(flyd))
	}
	first := status("running").PID
	step("stop")
	status("stopped")
	step("start")
	status("running")
	step("restart")
	if st := status("running"); st.PID == first || st.PID == 0 {
		t.Errorf("restart left pid %d, want a new flyd", st.PID)
	}
	step("uninstall")
	if _, err := key.get("fly"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("uninstall left the value (%v)", err)
	}
	if _, err := c.ping(ctx); err == nil {
		t.Errorf("flyd still answers after uninstall")
	}
	// --no-console: flyd wrote its log itself, into the state directory.
	log, _ := os.ReadFile(filepath.Join(env[paths.EnvStateDir], "flyd.log"))
	if n := strings.Count(string(log), `msg="flyd listening"`); n != 3 {
		t.Errorf("flyd.log says \"flyd listening\" %d times, want 3 (install, start, restart):\n%s", n, log)
	}
}
