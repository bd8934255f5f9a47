package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Runs outlive flyd: each flutter run is held by a holder process of
// flyd's own binary, which spools its output while flyd is away; the next
// flyd takes the run back with nothing lost and nothing twice.

// floodLines is how many numbered lines a flood prints.
const floodLines = 200_000

// heldState reads the state file of run id's holder in e.
func heldState(t testing.TB, e *flytest.Env, id string) holder.State {
	t.Helper()
	st, err := holder.ReadState(filepath.Join(e.Paths.Runs(), id))
	if err != nil {
		t.Fatalf("the holder's state of run %s: %v", id, err)
	}
	return st
}

// spoolHolds reports whether the spool of run id's holder holds the app
// line text.
func spoolHolds(e *flytest.Env, id, text string) bool {
	found := errors.New("found")
	_, err := holder.ReadSpool(filepath.Join(e.Paths.Runs(), id), 0, func(r holder.Record) error {
		if strings.Contains(string(r.Data), text) {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

// lastTickSpool is the newest tick in run id's spool, for the test's log.
func lastTickSpool(e *flytest.Env, id string) int {
	n := 0
	_, _ = holder.ReadSpool(filepath.Join(e.Paths.Runs(), id), 0, func(r holder.Record) error {
		if i := strings.Index(string(r.Data), "flutter: tick "); i >= 0 {
			if k, ok := tickOf(strings.TrimRight(string(r.Data[i:]), `"}]`)); ok {
				n = k
			}
		}
		return nil
	})
	return n
}

// logLines reads the log of run id (its last tail lines) through flyd's
// local API. flyd cuts a reader too slow for its write timeout (a loaded
// machine, 200k lines): it reads on after the last line it has, as
// flyctl logs does.
func logLines(t testing.TB, e *flytest.Env, id string, tail int) []wire.LogLine {
	t.Helper()
	lc := localclient.New(e.Paths.Socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []wire.LogLine
	opts := localclient.LogsOptions{Tail: tail}
	for cuts := 0; ; cuts++ {
		s, err := lc.Logs(ctx, id, opts)
		if err != nil {
			t.Fatalf("logs of run %s: %v", id, err)
		}
		for {
			l, err := s.Next()
			if errors.Is(err, io.EOF) {
				s.Close()
				return out
			}
			if err != nil {
				s.Close()
				if cuts == 10 || ctx.Err() != nil {
					t.Fatalf("logs of run %s: %v (cut %d times)", id, err, cuts+1)
				}
				break
			}
			if l.Type == wire.LogLineEntry || l.Type == wire.LogLineGap {
				out = append(out, l)
				opts = localclient.LogsOptions{After: l.Seq, Tail: localclient.AllLines}
			}
		}
	}
}

// lastTick is the number of the newest "flutter: tick N" line of run id's
// log, 0 if none.
func lastTick(t testing.TB, e *flytest.Env, id string) int {
	t.Helper()
	lines := logLines(t, e, id, 50)
	for i := len(lines) - 1; i >= 0; i-- {
		if n, ok := tickOf(lines[i].Text); ok {
			return n
		}
	}
	return 0
}

func tickOf(text string) (int, bool) {
	s, ok := strings.CutPrefix(text, "flutter: tick ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.Fields(s)[0])
	return n, err == nil
}

// checkEveryTickOnce checks that run id's log holds the ticks 1…n, each
// once, in order, with no gap.
func checkEveryTickOnce(t testing.TB, e *flytest.Env, id string, n int) {
	t.Helper()
	next := 1
	for _, l := range logLines(t, e, id, localclient.AllLines) {
		if l.Type == wire.LogLineGap {
			t.Fatalf("the log has a gap: %s", l.Text)
		}
		k, ok := tickOf(l.Text)
		if !ok {
			continue
		}
		if k != next {
			t.Fatalf("tick %d where tick %d was due (seq %d): lines lost or taken twice", k, next, l.Seq)
		}
		next++
	}
	if next != n+1 {
		t.Fatalf("the log holds ticks 1…%d, want 1…%d", next-1, n)
	}
}

// runPID is run id's pid as runs_list gives it, and its state.
func runPID(t testing.TB, cs *mcp.ClientSession, id string) wire.Run {
	t.Helper()
	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	ri, ok := findRun(listed.Runs, id)
	if !ok {
		t.Fatalf("runs_list lacks run %s: %+v", id, listed.Runs)
	}
	return ri
}

// floodAcrossRestart: a run floods floodLines numbered lines; flyd goes
// (stop) while it is still taking them in; the holder spools the rest
// meanwhile, far more than a pipe holds; the next flyd (start) has the
// same app live, every line exactly once, a working hot reload, and a
// stop that records the exit code.
func floodAcrossRestart(t *testing.T, e *flytest.Env, first *flytest.Flyd, stop func(*flytest.Flyd), start func() *flytest.Flyd) (string, *flytest.Flyd) {
	root := flutterProject(t)
	cs := viaShim(e)(t, "flooder", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	before := runPID(t, cs, started.RunID)
	if before.Holder != "holder" {
		t.Fatalf("run %+v is not held", before)
	}
	t0 := time.Now()
	flytest.Eventually(t, "flyd taking the flood in", func() bool { return lastTick(t, e, started.RunID) >= 10_000 })
	cs.Close() // else its shim starts a flyd of its own as this one goes
	stop(first)
	t.Logf("flyd went after %v, at tick %d", time.Since(t0), lastTickSpool(e, started.RunID))
	// The holder takes the rest: far more than a pipe holds.
	flytest.Eventually(t, "the holder's spool holding the last line", func() bool {
		return spoolHolds(e, started.RunID, fmt.Sprintf("flutter: tick %d\"", floodLines))
	})
	if !alive(before.PID) {
		t.Fatal("the app died with flyd")
	}
	t.Logf("the holder spooled the rest after %v", time.Since(t0))
	d := start()
	cs = viaShim(e)(t, "after", root, nil)
	flytest.Eventually(t, "the next flyd taking the flood in", func() bool { return lastTick(t, e, started.RunID) == floodLines })
	t.Logf("the next flyd took the rest in after %v", time.Since(t0))
	after := runPID(t, cs, started.RunID)
	if after.PID != before.PID || after.State != "running" || !alive(after.PID) {
		t.Fatalf("after the restart run = %+v, want pid %d running", after, before.PID)
	}
	checkEveryTickOnce(t, e, started.RunID, floodLines)
	t.Logf("checked after %v", time.Since(t0))

	var reload mcpserver.RestartResult
	if res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, &reload); res.IsError || reload.Code != 0 {
		t.Fatalf("hot reload after the restart = %+v %s", reload, toolText(res))
	}
	var stopped mcpserver.StopResult
	if res := callTool(t, cs, "flutter_stop", map[string]any{"run_id": started.RunID}, &stopped); res.IsError || stopped.State != "stopped" ||
		stopped.ExitCode == nil || *stopped.ExitCode != 0 {
		t.Fatalf("flutter_stop after the restart = %+v %s", stopped, toolText(res))
	}
	waitGone(t, "the stopped app", before.PID)
	return started.RunID, d
}

// TestCrashLosesNoLine: kill -9 flyd in the middle of a flood.
func TestCrashLosesNoLine(t *testing.T) {
	t.Parallel()
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvLines+"="+strconv.Itoa(floodLines), fakeflutter.EnvLinesPerSec+"=40000")
	args := []string{"--stored-log-lines", "400000"}
	d := flytest.StartFlyd(t, e, args...)
	floodAcrossRestart(t, e, d, func(d *flytest.Flyd) { d.Kill(t) }, func() *flytest.Flyd { return flytest.StartFlyd(t, e, args...) })
}

// TestCleanRestartKeepsRuns: the same with flyd stopped cleanly (SIGTERM,
// as a service manager does).
func TestCleanRestartKeepsRuns(t *testing.T) {
	t.Parallel()
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvLines+"="+strconv.Itoa(floodLines), fakeflutter.EnvLinesPerSec+"=40000")
	args := []string{"--stored-log-lines", "400000"}
	d := flytest.StartFlyd(t, e, args...)
	floodAcrossRestart(t, e, d, func(d *flytest.Flyd) { d.Stop(t) }, func() *flytest.Flyd { return flytest.StartFlyd(t, e, args...) })
}

// TestUpgradeKeepsRuns: the run starts under one build of flyd; flyd
// stops (flyctl daemon stop), and a build of a newer release, whose
// holder protocol is one newer, takes the run back, speaking the old
// holder's version; its own new runs get holders of the new version.
func TestUpgradeKeepsRuns(t *testing.T) {
	t.Parallel()
	newer := flytest.BuildFlyd(t, "-X github.com/fly-dev/fly/internal/wire.version=9.9.9 -X github.com/fly-dev/fly/internal/holder.protocolVersion=2")
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvLines+"="+strconv.Itoa(floodLines), fakeflutter.EnvLinesPerSec+"=40000")
	args := []string{"--stored-log-lines", "400000"}
	d := flytest.StartFlyd(t, e, args...)
	var upgraded *flytest.Flyd
	id, _ := floodAcrossRestart(t, e, d, func(d *flytest.Flyd) {
		lc := localclient.New(e.Paths.Socket)
		defer lc.CloseIdleConnections()
		if _, err := lc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.Stop(t) // waits for its exit
	}, func() *flytest.Flyd {
		upgraded = flytest.StartFlydBinary(t, e, newer, args...)
		return upgraded
	})
	st, err := getStatus(e)
	if err != nil || st.Version != "9.9.9" {
		t.Fatalf("the upgraded flyd's status = %+v, %v", st, err)
	}
	var b strings.Builder
	for _, l := range logLines(t, e, id, localclient.AllLines) {
		if l.Stream == "fly" {
			b.WriteString(l.Text + "\n")
		}
	}
	text := b.String()
	if !strings.Contains(text, "flyd 9.9.9 took this run back from its holder") || !strings.Contains(text, "protocol 1)") {
		t.Errorf("the run's log does not say the newer flyd took it back at protocol 1:\n%s", text[max(0, len(text)-3000):])
	}
	// A run the newer flyd starts has a holder of its own version.
	root := flutterProject(t)
	cs := viaShim(e)(t, "new", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run on the upgraded flyd: %s", toolText(res))
	}
	if p := heldState(t, e, started.RunID).Protocol; p.Max != 2 {
		t.Errorf("a new run's holder speaks %v, want up to 2", p)
	}
}

// TestHolderCrashDegrades: kill -9 the run's holder. The app lives on; the
// run is degraded, and says so in tool results; a hot reload still works
// (through the app's VM service), and a stop still ends the app.
func TestHolderCrashDegrades(t *testing.T) {
	t.Parallel()
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flytest.StartFlyd(t, e, "--stop-grace", "1s")
	root := flutterProject(t)
	cs := viaShim(e)(t, "agent", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	st := heldState(t, e, started.RunID)
	if err := flytest.Signal(st.Holder.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	flytest.Eventually(t, "the run degraded", func() bool { return runPID(t, cs, started.RunID).Holder == "degraded" })
	ri := runPID(t, cs, started.RunID)
	if ri.State != "running" || ri.PID != st.Child.PID || !alive(ri.PID) || !strings.Contains(ri.Degraded, "holder") {
		t.Fatalf("after the holder's death run = %+v, want its app (pid %d) running, degraded", ri, st.Child.PID)
	}
	if text := toolText(callTool(t, cs, "runs_list", nil, nil)); !strings.Contains(text, "degraded") {
		t.Errorf("runs_list does not say the run is degraded:\n%s", text)
	}
	var reload mcpserver.RestartResult
	res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, &reload)
	if res.IsError || reload.Code != 0 || !strings.Contains(toolText(res), "degraded") {
		t.Errorf("hot reload of the degraded run = %+v %s, want applied, and said degraded", reload, toolText(res))
	}
	var stopped mcpserver.StopResult
	res = callTool(t, cs, "flutter_stop", map[string]any{"run_id": started.RunID}, &stopped)
	if res.IsError || stopped.State != "stopped" || !strings.Contains(toolText(res), "degraded") {
		t.Fatalf("flutter_stop of the degraded run = %+v %s", stopped, toolText(res))
	}
	waitGone(t, "the degraded run's app after its stop", st.Child.PID)
}

// TestSharedRunAcrossRestart: two agents share a run; one claims it and
// hot-reloads it; flyd dies and another takes the run back. The claim
// still holds (the other agent's reload is refused), the other agent is
// told, once, what happened before the restart, and nothing it already
// heard; the claim's holder still holds it and releases it.
func TestSharedRunAcrossRestart(t *testing.T) {
	t.Parallel()
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=100")
	d := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	a := viaShimNoStart(e)(t, "agent-a", root, nil)
	b := viaShimNoStart(e)(t, "agent-b", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, a, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	if res := callTool(t, b, "flutter_claim", map[string]any{"run_id": started.RunID, "note": "refactoring the router"}, nil); res.IsError {
		t.Fatalf("B's claim: %s", toolText(res))
	}
	if text := toolText(callTool(t, a, "runs_list", nil, nil)); !strings.Contains(text, `"agent-b"`) || !strings.Contains(text, "claimed") {
		t.Fatalf("A's runs_list does not tell of B's claim:\n%s", text)
	}
	if res := callTool(t, b, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, nil); res.IsError {
		t.Fatalf("B's hot reload: %s", toolText(res))
	}

	d.Kill(t)
	flytest.StartFlyd(t, e)

	res := callTool(t, a, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, nil)
	text := toolText(res)
	if !res.IsError || !strings.Contains(text, "claimed by") || !strings.Contains(text, "refactoring the router") {
		t.Errorf("A's hot reload after the restart = %q, want refused: B's claim holds", text)
	}
	if !strings.Contains(text, "Meanwhile") || !strings.Contains(text, "hot-reloaded") {
		t.Errorf("A's first result after the restart = %q, want the news of B's reload", text)
	}
	if strings.Contains(text, "claimed this run") {
		t.Errorf("A is told again of B's claim, which it heard before the restart: %q", text)
	}
	if res := callTool(t, b, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, nil); res.IsError {
		t.Errorf("B's hot reload after the restart (it holds the claim): %s", toolText(res))
	}
	if res := callTool(t, b, "flutter_claim", map[string]any{"run_id": started.RunID, "release": true}, nil); res.IsError {
		t.Errorf("B's release after the restart: %s", toolText(res))
	}
	if res := callTool(t, a, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, nil); res.IsError {
		t.Errorf("A's hot reload once B released the run: %s", toolText(res))
	}
}
