package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
		ok   bool
	}{
		{"1.2.3", "1.2.3", 0, true},
		{"v1.2.3", "1.2.3", 0, true},
		{"1.2.3", "1.10.0", -1, true},
		{"2.0.0", "1.99.99", 1, true},
		{"1.2", "1.2.0", 0, true},
		{"0.1.0-dev", "0.1.0", -1, true},
		{"0.1.0", "0.1.0-dev", 1, true},
		{"0.0.9", "0.1.0-dev", -1, true},
		{"1.0.0-alpha", "1.0.0-alpha.1", -1, true},
		{"1.0.0-alpha.1", "1.0.0-alpha.beta", -1, true},
		{"1.0.0-beta.2", "1.0.0-beta.11", -1, true},
		{"1.0.0-rc.1", "1.0.0-beta.11", 1, true},
		{"1.2.3+abc", "1.2.3+def", 0, true},
		{"0.0.0-20261127102030-8cc058e1a2b3+dirty", "0.0.0-20261128090000-0123456789ab", -1, true},
		{"3.9.0", "3.9.0", 0, true},
		{"3.10.0-1.0.dev", "3.9.0", 1, true},
		{"dev", "1.0.0", 0, false},
		{"1.x", "1.0.0", 0, false},
		{"", "1.0.0", 0, false},
	}
	for _, tt := range tests {
		got, ok := compareVersions(tt.a, tt.b)
		if got != tt.want || ok != tt.ok {
			t.Errorf("compareVersions(%q, %q) = %d, %v; want %d, %v", tt.a, tt.b, got, ok, tt.want, tt.ok)
		}
	}
}

// oldFlyd answers /v1/status on a fresh socket as a flyd of release
// version would, and returns the socket.
func oldFlyd(t *testing.T, version string, pid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: filepath.Join(dir, "flyd.sock"), paths.EnvStateDir: dir}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ipc.Listen(p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, version+" protocol=1")
		json.NewEncoder(w).Encode(wire.Status{Version: version, Protocol: wire.Protocol, PID: pid, Socket: p.Socket, StateDir: dir})
	})}
	go srv.Serve(ln) // owned by the test: Close stops it
	t.Cleanup(func() { srv.Close() })
	return p.Socket
}

// TestNoticeOlderFlyd: after an upgrade, a command that asks an older
// flyd says once how to restart it; a flyd of this release or newer says
// nothing.
func TestNoticeOlderFlyd(t *testing.T) {
	for _, tc := range []struct {
		version string
		notice  bool
	}{
		{"0.0.1", true},
		{wire.Version, false},
		{"999.0.0", false},
	} {
		sock := oldFlyd(t, tc.version, 4242)
		env := svcEnv(map[string]string{"HOME": t.TempDir(), paths.EnvSocket: sock, paths.EnvStateDir: filepath.Dir(sock)})
		var stdout, stderr bytes.Buffer
		c := &call{getenv: env, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		for range 3 {
			lc, err := c.client()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lc.Status(context.Background()); err != nil {
				t.Fatal(err)
			}
			lc.CloseIdleConnections()
		}
		got := stderr.String()
		want := "flyctl: flyd 0.0.1 is running, older than this flyctl " + wire.Version + ": stop it (" + killHint(4242) + "; its flutter runs go on), and the next flyctl mcp starts the new one\n"
		switch {
		case tc.notice && got != want:
			t.Errorf("flyd %s: stderr =\n%q\nwant once\n%q", tc.version, got, want)
		case !tc.notice && got != "":
			t.Errorf("flyd %s: stderr = %q, want nothing", tc.version, got)
		}
	}
}

// TestDoctorOlderFlyd: doctor fails on a flyd older than flyctl, and
// says how to restart it: with the service when it is installed.
func TestDoctorOlderFlyd(t *testing.T) {
	e := newSetupEnv(t)
	sock := oldFlyd(t, "0.0.1", 4242)
	e.env[paths.EnvSocket] = sock
	out, _, code := e.run(t, "", "doctor", "--json")
	if code != 1 {
		t.Errorf("doctor with an older flyd exits %d, want 1\n%s", code, out)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out)
	}
	if r.OK || len(r.Checks) == 0 || r.Checks[0].Name != "flyd" || r.Checks[0].Status != checkFail ||
		!strings.Contains(r.Checks[0].Message, "older than this flyctl") || !strings.Contains(r.Checks[0].Fix, killHint(4242)) {
		t.Errorf("doctor --json's flyd check = %+v", r.Checks)
	}
	// With the service installed (and the default paths), the advice is
	// to restart it.
	delete(e.env, paths.EnvSocket)
	delete(e.env, paths.EnvStateDir)
	if _, _, code := e.run(t, "", "setup", "--no-service", "--client", "cursor"); code != 0 {
		t.Fatal("setup failed")
	}
	if code := e.exec(t, "install"); code != 0 {
		t.Fatalf("service install exits %d: %s", code, &e.stderr)
	}
	c := &call{getenv: e.getenv, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, service: e.serviceCmd, host: e.h}
	if got := c.restartAdvice(4242); !strings.Contains(got, "flyctl service restart") {
		t.Errorf("restartAdvice with the service installed = %q, want flyctl service restart", got)
	}
}

// TestDoctorFailures: a client whose fly runs another flyctl, no
// flutter, and a service that runs another flyd are failures, each with
// its fix.
func TestDoctorFailures(t *testing.T) {
	e := newSetupEnv(t)
	other := filepath.Join(e.dir, "old", "flyctl"+exeSuffix)
	svcWriteExecutable(t, other)
	e.write(t, ".cursor/mcp.json", `{"mcpServers": {"fly": {"command": "`+jsonText(other)+`", "args": ["mcp"]}}}`)
	e.write(t, ".codeium/windsurf/mcp_config.json", `{"mcpServers": {"fly": {"command": "flyctl", "args": ["mcp"]}}}`)
	e.withRival(t) // so that "flyctl" by name is fly.io's
	e.env["FLUTTER_ROOT"] = filepath.Join(e.dir, "no-flutter")
	out, _, code := e.run(t, "", "doctor", "--json")
	if code != 1 {
		t.Errorf("doctor exits %d, want 1", code)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out)
	}
	want := map[string]string{
		"client:cursor":   "flyctl setup --client cursor",
		"client:windsurf": "flyctl setup --client windsurf",
		"flutter":         "FLUTTER_ROOT",
	}
	for _, ch := range r.Checks {
		if fix, ok := want[ch.Name]; ok {
			if ch.Status != checkFail || !strings.Contains(ch.Fix, fix) {
				t.Errorf("check %s = %+v, want a failure whose fix says %q", ch.Name, ch, fix)
			}
			delete(want, ch.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("doctor did not check %v:\n%s", want, out)
	}
}

// TestShimNoticesOlderFlyd: flyctl mcp, connected to a flyd of its
// protocol but an older release, says once on stderr how to restart it,
// and relays on.
func TestShimNoticesOlderFlyd(t *testing.T) {
	_, bin := flytest.Binaries(t)
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	env := map[string]string{paths.EnvSocket: filepath.Join(dir, "flyd.sock"), paths.EnvStateDir: dir, "HOME": filepath.Join(dir, "home")}
	p, err := paths.Resolve(svcEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ipc.Listen(p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(wire.RouteStatus, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, "0.0.1 protocol=1")
		json.NewEncoder(w).Encode(wire.Status{Version: "0.0.1", Protocol: wire.Protocol, PID: 4242})
	})
	mux.HandleFunc(wire.RouteMCP, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, "0.0.1 protocol=1")
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wire.Subprotocol}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			if _, _, err := ws.Read(r.Context()); err != nil {
				return
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln) // owned by the test: Close stops it
	t.Cleanup(func() { srv.Close() })

	project := filepath.Join(dir, "proj")
	os.MkdirAll(project, 0o755)
	cmd := exec.Command(bin, "mcp", "--workspace", project, "--reconnect-timeout", "0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for _, k := range []string{"SystemRoot", "PATHEXT"} { // what Windows programs need
		if v := os.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &flytest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	want := "flyctl: flyd 0.0.1 is running, older than this flyctl " + wire.Version + ": stop it (" + killHint(4242)
	flytest.Eventually(t, "flyctl mcp's notice of an older flyd", func() bool { return strings.Contains(stderr.String(), want) })
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("flyctl mcp = %v; stderr:\n%s", err, stderr)
	}
	if n := strings.Count(stderr.String(), "older than this flyctl"); n != 1 {
		t.Errorf("flyctl mcp said it %d times, want once:\n%s", n, stderr)
	}
}

func TestIdentifyFlyctlFormats(t *testing.T) {
	for line, fly := range map[string]bool{
		"flyctl 1.2.3 (commit abc1234, 2026-11-27; protocol 1)":                        true,
		"flyctl 0.1.0-dev (protocol 1)":                                                true,
		"flyctl v0.3.164 linux/amd64 Commit: f767253a BuildDate: 2025-07-30T12:20:14Z": false,
	} {
		if got := reFlyVersion.MatchString(line); got != fly {
			t.Errorf("reFlyVersion.MatchString(%q) = %v, want %v", line, got, fly)
		}
		if got := reFlyioVersion.MatchString(line); got == fly {
			t.Errorf("reFlyioVersion.MatchString(%q) = %v, want %v", line, got, !fly)
		}
	}
}
