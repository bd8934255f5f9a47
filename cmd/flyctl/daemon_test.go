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

// TestDaemonStop: flyctl daemon stop stops a running flyd and its runs,
// says so, and is no error when nothing runs.
func TestDaemonStop(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flyd := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs, _ := mcpSession(t, e, root)
	id := startRun(t, cs)
	var list struct {
		Runs []struct {
			RunID string `json:"run_id"`
			PID   int    `json:"pid"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(mustFlyctl(t, e.Getenv, "runs", "--json")), &list); err != nil || len(list.Runs) != 1 || list.Runs[0].RunID != id {
		t.Fatalf("runs --json = %+v, %v; want run %s", list, err, id)
	}
	runPID := list.Runs[0].PID
	cs.Close() // else its shim would start a new flyd as this one stops

	out := mustFlyctl(t, e.Getenv, "daemon", "stop")
	if want := "stopped flyd (pid " + strconv.Itoa(flyd.Cmd.Process.Pid) + ") and its runs"; !strings.Contains(out, want) {
		t.Errorf("daemon stop = %q, want %q", out, want)
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
