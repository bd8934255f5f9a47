package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/proc"
)

// TestDaemonStop: flyctl daemon stop stops a running flyd and says so;
// its flutter run goes on, and the next flyd has it live. daemon stop
// --runs stops flyd and its runs. Neither is an error when nothing runs.
func TestDaemonStop(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flyd := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs, _ := mcpSession(t, e, root)
	id := startRun(t, cs)
	runPID := runsPID(t, e, id)
	cs.Close() // else its shim would start a new flyd as this one stops

	out := mustFlyctl(t, e.Getenv, "daemon", "stop")
	if want := "stopped flyd (pid " + strconv.Itoa(flyd.Cmd.Process.Pid) + "); its flutter runs go on"; !strings.Contains(out, want) {
		t.Errorf("daemon stop = %q, want %q", out, want)
	}
	flytest.Eventually(t, "flyd gone", func() bool {
		a, _ := proc.Alive(flyd.Cmd.Process.Pid)
		return !a
	})
	if a, _ := proc.Alive(runPID); !a {
		t.Fatalf("the run (pid %d) died with flyd", runPID)
	}

	flyd = flytest.StartFlyd(t, e)
	if pid := runsPID(t, e, id); pid != runPID {
		t.Fatalf("after the restart, run %s has pid %d, want %d", id, pid, runPID)
	}
	out = mustFlyctl(t, e.Getenv, "daemon", "stop", "--runs")
	if want := "stopped flyd (pid " + strconv.Itoa(flyd.Cmd.Process.Pid) + ") and its runs"; !strings.Contains(out, want) {
		t.Errorf("daemon stop --runs = %q, want %q", out, want)
	}
	flytest.Eventually(t, "flyd and its run gone", func() bool {
		a, _ := proc.Alive(flyd.Cmd.Process.Pid)
		b, _ := proc.Alive(runPID)
		return !a && !b
	})
	if out := mustFlyctl(t, e.Getenv, "daemon", "stop", "--json"); !regexp.MustCompile(`"stopped":\s*false`).MatchString(out) {
		t.Errorf("daemon stop --json with no flyd = %q, want stopped false", out)
	}
}

// runsPID is the pid of live run id, as flyctl runs --json lists it.
func runsPID(t *testing.T, e *flytest.Env, id string) int {
	t.Helper()
	var list struct {
		Runs []struct {
			RunID string `json:"run_id"`
			State string `json:"state"`
			PID   int    `json:"pid"`
		} `json:"runs"`
	}
	out := mustFlyctl(t, e.Getenv, "runs", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("runs --json = %s: %v", out, err)
	}
	for _, r := range list.Runs {
		if r.RunID == id && r.State == "running" {
			return r.PID
		}
	}
	t.Fatalf("runs --json = %s, want run %s running", out, id)
	return 0
}
