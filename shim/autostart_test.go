package shim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/wine"
)

// This file holds the tests of starting flyd when none answers, with the test binary as flyd.

// setHelperEnv makes flyd started by a relay run the test binary as the
// fake flyd in mode, on sock and state.
func setHelperEnv(t *testing.T, mode, sock, state string) []string {
	t.Setenv(helperEnv, mode)
	t.Setenv("FLY_SOCKET", sock)
	t.Setenv("FLY_STATE_DIR", state)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(state, helperPIDFile))
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(string(b)); err == nil {
			proc.SignalProcess(pid, proc.Kill)
		}
	})
	return []string{exe, "run"}
}

func TestAutostart(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "late", sock, state)
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	if r := h.readReply(); string(r.ID) != "1" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 1", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
	wine.SkipUnder(t, "Wine keeps no access list of its own on a file")
	for _, p := range []string{state, filepath.Join(state, "flyd.log")} {
		if fi, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if ok, err := owner.Secret(p, fi); !ok || err != nil {
			t.Errorf("%s (%v) is not private: %v", p, fi.Mode(), err)
		}
	}
}

func TestAutostartExits(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "fail", sock, state)
	os.MkdirAll(state, 0o700)
	os.WriteFile(filepath.Join(state, "flyd.log"), []byte("an earlier run\n"), 0o600)
	start := time.Now()
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd, StartTimeout: 10 * time.Second})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd exited (exit status 1)") {
		t.Errorf("reply = %s, want an error saying flyd exited", r.raw)
	}
	h.closeStdin()
	err := h.wait()
	if err == nil {
		t.Fatal("Run = nil, want an error")
	}
	msg := err.Error()
	for _, want := range []string{"flyd exited (exit status 1)", endpointOf(t, sock), filepath.Join(state, "flyd.log"),
		"flyd: line 07", "flyd: line 15", "flyd: cannot open fly.db: boom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Run = %q, want it to contain %q", msg, want)
		}
	}
	for _, unwanted := range []string{"flyd: line 06", "an earlier run"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("Run = %q, want only the last 10 lines of this start's log, not %q", msg, unwanted)
		}
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Run took %v to report the exit, want about %v", d, exitGrace)
	}
	h.expectEOF()
}

func TestAutostartTimeout(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "mute", sock, state)
	start := time.Now()
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd, StartTimeout: 700 * time.Millisecond})
	sock = endpointOf(t, sock)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd did not answer on "+sock) {
		t.Errorf("reply = %s, want an error saying flyd did not answer", r.raw)
	}
	h.closeStdin()
	err := h.wait()
	want := "flyd did not answer on " + sock + " within 700ms; its log is " + filepath.Join(state, "flyd.log")
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "flyd: opening fly.db") {
		t.Errorf("Run = %v, want %q and the log's tail", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v, want about 700ms", d)
	}
	h.expectEOF()
}
