package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/paths"
)

// envNoConsoleChild makes the test binary the child of TestNoConsole.
const envNoConsoleChild = "FLYD_TEST_NO_CONSOLE_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envNoConsoleChild); dir != "" {
		noConsoleChild(dir)
		return
	}
	os.Exit(m.Run())
}

// noConsoleChild does what flyd run --no-console does with its log, then
// writes to stderr and panics, as a crashing flyd would.
func noConsoleChild(stateDir string) {
	f, err := noConsoleLog(paths.Paths{StateDir: stateDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	slog.New(slog.NewTextHandler(f, nil)).Info("logged by flyd's logger")
	fmt.Fprintln(os.Stderr, "written to stderr")
	panic("flyd crashed")
}

// TestNoConsole: with --no-console flyd's log goes to flyd.log in the
// state directory, which it makes; on Windows, so do its stderr and a
// panic's trace (the console is gone), elsewhere they stay on stderr.
func TestNoConsole(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state", "fly")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envNoConsoleChild+"="+state)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("the child did not panic; its output:\n%s", &out)
	}
	log, err := os.ReadFile(filepath.Join(state, "flyd.log"))
	if err != nil {
		t.Fatalf("no flyd.log: %v; the child's output:\n%s", err, &out)
	}
	if !strings.Contains(string(log), "logged by flyd's logger") {
		t.Errorf("flyd.log =\n%s\nwant the logger's line", log)
	}
	inLog := runtime.GOOS == "windows" // where --no-console leaves the console
	for _, w := range []string{"written to stderr", "panic: flyd crashed"} {
		if got := strings.Contains(string(log), w); got != inLog {
			t.Errorf("flyd.log holds %q: %v, want %v; flyd.log:\n%s\nstderr:\n%s", w, got, inLog, log, &out)
		}
		if got := strings.Contains(out.String(), w); got == inLog {
			t.Errorf("stderr holds %q: %v, want %v; stderr:\n%s", w, got, !inLog, &out)
		}
	}
}

func TestRunHelpNoConsole(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"run", "--help"}, os.Getenv, &stdout, &stderr); exitCode(err, &stderr) != 0 {
		t.Fatalf("flyd run --help = %v", err)
	}
	if !strings.Contains(stderr.String(), "--no-console") {
		t.Errorf("flyd run --help does not list --no-console:\n%s", &stderr)
	}
}
