package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// This file holds the tests that ask this machine's own systemd.

// TestServiceNoUserSystemd checks the hint when this machine has no user
// systemd, as in CI containers.
func TestServiceNoUserSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux only")
	}
	if err := probeSystemdUser(context.Background()); err == nil {
		t.Skip("systemctl --user works here; TestServiceSystemdUser covers it")
	}
	home := t.TempDir()
	p := svcPlatform(t, "linux", home)
	os.MkdirAll(filepath.Dir(p.file), 0o755)
	os.WriteFile(p.file, []byte("[Service]\nExecStart=/x/flyd run\n"), 0o644)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"service", "start"}, svcEnv(map[string]string{"HOME": home}), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "systemctl --user is not available") || !strings.Contains(err.Error(), "run flyd in the foreground with: flyd run") {
		t.Errorf("flyctl service start without user systemd = %v, want a hint", err)
	}
	if code := exitCode(err, io.Discard); code != 1 {
		t.Errorf("flyctl service start without user systemd exits %d, want 1", code)
	}
}

// TestServiceSystemdUser installs, starts, stops and removes the service for
// real, with a flyd built from this tree. It needs a user systemd session,
// which CI containers lack, and leaves an existing flyd service alone.
func TestServiceSystemdUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux only")
	}
	if err := probeSystemdUser(context.Background()); err != nil {
		t.Skipf("no user systemd here, so only the rendering is tested: %v", err)
	}
	if testing.Short() {
		t.Skip("-short: not touching the user's systemd")
	}
	p := svcPlatform(t, "linux", os.Getenv("HOME"))
	if svcFileExists(p.file) {
		t.Skipf("%s exists; not touching this user's flyd service", p.file)
	}
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../flyd").CombinedOutput(); err != nil {
		t.Fatalf("go build flyd: %v\n%s", err, out)
	}
	env := map[string]string{
		"FLY_SOCKET":    filepath.Join(dir, "flyd.sock"),
		"FLY_STATE_DIR": filepath.Join(dir, "state"),
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	var stdout, stderr bytes.Buffer
	c := &serviceCmd{
		goos:       runtime.GOOS,
		getenv:     getenv,
		geteuid:    os.Geteuid,
		executable: func() (string, error) { return filepath.Join(bin, "flyctl"), nil },
		connect:    connectManager,
		linger:     lingerEnabled,
		ping:       pingDaemon(getenv),
		stdout:     &stdout,
		stderr:     &stderr,
	}
	ctx := context.Background()
	t.Cleanup(func() {
		if svcFileExists(p.file) {
			c.run(ctx, []string{"uninstall"})
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
	wantState := func(state string) {
		t.Helper()
		step("status", "--json")
		var st serviceStatus
		if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != state || st.Flyd != filepath.Join(bin, "flyd") {
			t.Errorf("status = %+v, want %s running %s", st, state, filepath.Join(bin, "flyd"))
		}
	}
	step("install", "--allow-root")
	wantState("running")
	step("stop")
	wantState("stopped")
	step("start")
	wantState("running")
	step("restart")
	wantState("running")
	step("uninstall")
	if svcFileExists(p.file) {
		t.Errorf("uninstall left %s", p.file)
	}
	if _, err := c.ping(ctx); err == nil {
		t.Errorf("flyd still answers after uninstall")
	}
}
