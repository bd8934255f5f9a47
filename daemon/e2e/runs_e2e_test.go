package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// flutterProject is a minimal project to run.
func flutterProject(t testing.TB) string {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	})
	return root
}

// callTool calls a tool and decodes its structured result into out.
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	return callToolWith(t, cs, &mcp.CallToolParams{Name: name, Arguments: args}, out)
}

func callToolWith(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", p.Name, b, err)
		}
	}
	return res
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	ok, err := proc.Alive(pid)
	return ok && err == nil
}

// waitGone waits until none of pids is alive.
func waitGone(t testing.TB, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes %v still alive", what, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func findRun(runs []wire.Run, id string) (wire.Run, bool) {
	i := slices.IndexFunc(runs, func(r wire.Run) bool { return r.RunID == id })
	if i < 0 {
		return wire.Run{}, false
	}
	return runs[i], true
}

// TestRunSharedBetweenClients: client A starts the app; client B sees the
// run, follows its log, hot-reloads and stops it; A sees it stopped. With
// clients of either era, through the shim and over Streamable HTTP.
func TestRunSharedBetweenClients(t *testing.T) {
	t.Parallel() // its own flyds: they wait mostly, so they overlap the others
	eachClient(t, func(t *testing.T) *flytest.Env {
		e := flytest.NewEnv(t)
		e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=50")
		flytest.StartFlyd(t, e)
		return e
	}, runSharedBetweenClients)
}

func runSharedBetweenClients(t *testing.T, _ *flytest.Env, connect connector, era func() *notes) {
	root := flutterProject(t)
	na, nb := era(), era()
	a := connect(t, "client-a", root, na)
	b := connect(t, "client-b", root, nb)

	var started mcpserver.RunResult
	if res := callTool(t, a, "flutter_run", map[string]any{"device": "linux"}, &started); res.IsError {
		t.Fatalf("flutter_run failed: %s", toolText(res))
	}
	if started.State != "running" || started.AppID == "" || !strings.HasPrefix(started.VMServiceURI, "ws://") ||
		!strings.HasPrefix(started.DTDURI, "ws://") || started.LogURI != "logs://run/"+started.RunID {
		t.Fatalf("flutter_run = %+v, want a running app with its URIs", started)
	}
	nb.waitListChanged(t) // B is told a run appeared

	var listed mcpserver.RunsListResult
	callTool(t, b, "runs_list", nil, &listed)
	ri, ok := findRun(listed.Runs, started.RunID)
	if !ok || ri.State != "running" || ri.PID == 0 {
		t.Fatalf("B's runs_list = %+v, want run %s running", listed.Runs, started.RunID)
	}
	uris, _ := listAll(t, b)
	if !slices.Contains(uris, started.LogURI) {
		t.Fatalf("B's resources/list lacks %s: %v", started.LogURI, uris[:min(10, len(uris))])
	}
	nb.subscribe(t, b, started.LogURI)
	nb.waitUpdated(t, started.LogURI)

	var reload mcpserver.RestartResult
	if res := callTool(t, b, "flutter_hot_reload", map[string]any{"run_id": started.RunID}, &reload); res.IsError || reload.Code != 0 {
		t.Fatalf("B's hot reload = %+v %s", reload, toolText(res))
	}
	if !strings.Contains(reload.Message, "Reloaded") {
		t.Errorf("hot reload message = %q", reload.Message)
	}
	text, meta := readText(t, b, started.LogURI+"?tail=50")
	if !strings.Contains(text, "Reloaded 1 of") || !strings.Contains(text, "flutter: tick") {
		t.Errorf("log after reload lacks the reload and app lines:\n%s", text)
	}
	if meta["last_seq"] == nil || meta["first_seq"] == nil || meta["total"] == nil {
		t.Errorf("log read _meta = %v, want first_seq, last_seq, total", meta)
	}

	var stopped mcpserver.StopResult
	if res := callTool(t, b, "flutter_stop", map[string]any{"run_id": started.RunID}, &stopped); res.IsError || stopped.State != "stopped" {
		t.Fatalf("B's flutter_stop = %+v %s", stopped, toolText(res))
	}
	callTool(t, a, "runs_list", nil, &listed)
	if ri, _ := findRun(listed.Runs, started.RunID); ri.State != "stopped" || ri.ExitCode == nil {
		t.Fatalf("A sees run %+v after B stopped it, want stopped with an exit code", ri)
	}
	waitGone(t, "stopped run", ri.PID)
}

// TestBuildFailure: a failing build reports its exit code, the tail of
// its log and a readable log, with progress notifications in order.
func TestBuildFailure(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvBuildFail+"=1")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)

	var mu sync.Mutex
	var progress []float64
	var messages []string
	opts := newNotes().options()
	opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, r.Params.Progress)
		messages = append(messages, r.Params.Message)
	}
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", root)
	cmd.Env = e.Vars
	c := mcp.NewClient(&mcp.Implementation{Name: "builder", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	p := &mcp.CallToolParams{Name: "flutter_build", Arguments: map[string]any{"platform": "android"}}
	p.SetProgressToken("build-1")
	var out mcpserver.BuildResult
	res := callToolWith(t, cs, p, &out)
	if !res.IsError {
		t.Fatalf("failing build reported success: %+v", out)
	}
	if out.ExitCode != 1 || out.State != "failed" || !strings.HasPrefix(out.LogURI, "logs://build/") {
		t.Errorf("build result = %+v, want exit 1, failed, a build log URI", out)
	}
	if tail := strings.Join(out.LogTail, "\n"); !strings.Contains(tail, "BUILD FAILED") {
		t.Errorf("log tail lacks the Gradle failure:\n%s", tail)
	}
	if text, _ := readText(t, cs, out.LogURI); !strings.Contains(text, "FAILURE: Build failed with an exception.") {
		t.Errorf("build log resource lacks the failure:\n%s", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatal("no progress notifications during the build")
	}
	if !slices.IsSorted(progress) {
		t.Errorf("progress went backwards: %v", progress)
	}
	if !slices.ContainsFunc(messages, func(m string) bool { return strings.Contains(m, "Gradle task") }) {
		t.Errorf("progress messages %q lack the Gradle step", messages)
	}
}

// TestBuildSuccess reports the artifact path of a built apk.
func TestBuildSuccess(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "builder", root, nil)
	var out mcpserver.BuildResult
	if res := callTool(t, cs, "flutter_build", map[string]any{"platform": "apk", "mode": "release"}, &out); res.IsError {
		t.Fatalf("build failed: %s", toolText(res))
	}
	if out.ExitCode != 0 || filepath.Base(out.ArtifactPath) != "app-release.apk" {
		t.Fatalf("build = %+v, want exit 0 and app-release.apk", out)
	}
	if _, err := os.Stat(out.ArtifactPath); err != nil {
		t.Errorf("artifact %s: %v", out.ArtifactPath, err)
	}
}

var grandchildRE = regexp.MustCompile(`grandchild pid (\d+)`)

// grandchildPID finds the pid the fake flutter printed in a log.
func grandchildPID(t testing.TB, cs *mcp.ClientSession, uri string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		text, _ := readText(t, cs, uri)
		if m := grandchildRE.FindStringSubmatch(text); m != nil {
			pid, _ := strconv.Atoi(m[1])
			return pid
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no grandchild pid in %s", uri)
	return 0
}

// TestStopKillsWholeGroup: an app that ignores app.stop and SIGTERM and
// has a grandchild leaves no process behind after flutter_stop.
func TestStopKillsWholeGroup(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvIgnoreSIGTERM+"=1", fakeflutter.EnvGrandchild+"=inherit", fakeflutter.EnvWrongAppID+"=1")
	flytest.StartFlyd(t, e, "--stop-grace", "500ms")
	root := flutterProject(t)
	cs := viaShim(e)(t, "stopper", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	gpid := grandchildPID(t, cs, started.LogURI)
	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	ri, _ := findRun(listed.Runs, started.RunID)
	if !alive(ri.PID) || !alive(gpid) {
		t.Fatalf("run %d or grandchild %d not alive before the stop", ri.PID, gpid)
	}
	var stopped mcpserver.StopResult
	if res := callTool(t, cs, "flutter_stop", map[string]any{"run_id": started.RunID}, &stopped); res.IsError {
		t.Fatalf("flutter_stop: %s", toolText(res))
	}
	if stopped.State != "stopped" {
		t.Errorf("state after stop = %q", stopped.State)
	}
	waitGone(t, "after flutter_stop", ri.PID, gpid)
	text, _ := readText(t, cs, started.LogURI)
	if !strings.Contains(text, "killing the process group") {
		t.Errorf("log does not say the group was killed:\n%s", text)
	}
}

// TestCancelBuildKillsGroup: cancelling a flutter_build call kills its
// process group, grandchild included.
func TestCancelBuildKillsGroup(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvStartupMS+"=60000", fakeflutter.EnvGrandchild+"=1", fakeflutter.EnvIgnoreSIGTERM+"=1")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "canceller", root, nil)
	watcher := viaShim(e)(t, "watcher", root, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // owned by the test: waited for below
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "flutter_build", Arguments: map[string]any{"platform": "web"}})
		done <- err
	}()
	var build wire.Run
	deadline := time.Now().Add(15 * time.Second)
	for build.RunID == "" && time.Now().Before(deadline) {
		var listed mcpserver.RunsListResult
		callTool(t, watcher, "runs_list", nil, &listed)
		if len(listed.Runs) > 0 && listed.Runs[0].State == "starting" {
			build = listed.Runs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if build.RunID == "" {
		t.Fatal("the build never showed up in runs_list")
	}
	gpid := grandchildPID(t, watcher, build.LogURI)
	cancel() // the client sends notifications/cancelled
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Logf("cancelled call returned %v", err)
	}
	waitGone(t, "after cancelling the build", build.PID, gpid)
	// It is recorded as cancelled, not as a failure.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var listed mcpserver.RunsListResult
		callTool(t, watcher, "runs_list", nil, &listed)
		ri, _ := findRun(listed.Runs, build.RunID)
		if ri.State == "cancelled" && strings.Contains(ri.Error, "cancelled") {
			break
		}
		if ri.State != "starting" && ri.State != "running" || time.Now().After(deadline) {
			t.Fatalf("cancelled build recorded as %q (%s), want cancelled", ri.State, ri.Error)
		}
	}
}

// TestCrashCountsLostLinesExactly kills flyd while the app prints a line
// a millisecond, with runs that end with flyd (--hold-runs=false; a held
// run loses nothing, see TestCrashLosesNoLine): lines published to
// followers but not yet stored are lost with it, and the next flyd says
// exactly how many, continuing the log right after the last seq any
// follower can have seen.
func TestCrashCountsLostLinesExactly(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=1")
	d := flytest.StartFlyd(t, e, "--hold-runs=false")
	root := flutterProject(t)
	cs := viaShim(e)(t, "follower", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	var seen float64
	for deadline := time.Now().Add(30 * time.Second); seen < 300; {
		if time.Now().After(deadline) {
			t.Fatalf("the app printed only %v lines", seen)
		}
		_, meta := readText(t, cs, started.LogURI+"?tail=1")
		seen = meta["last_seq"].(float64)
	}
	cs.Close()
	d.Kill(t)
	flytest.StartFlyd(t, e, "--hold-runs=false")
	cs2 := viaShim(e)(t, "after", root, nil)
	text, _ := readText(t, cs2, started.LogURI+"?tail=1500")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	note := lines[len(lines)-1]
	if !strings.Contains(note, "marked interrupted") {
		t.Fatalf("last line = %q, want the interrupted note", note)
	}
	noteSeq, _ := strconv.Atoi(strings.Fields(note)[0])
	if float64(noteSeq) <= seen {
		t.Errorf("note seq %d reuses a seq a follower saw (up to %v)", noteSeq, seen)
	}
	lost := 0
	if m := regexp.MustCompile(`the last (\d+) lines it printed were not stored`).FindStringSubmatch(note); m != nil {
		lost, _ = strconv.Atoi(m[1])
	} else if strings.Contains(note, "the last line it printed was not stored") {
		lost = 1
	}
	t.Logf("note %q, follower had seen seq %v", note, seen)
	gap := regexp.MustCompile(`… (\d+) lines? lost`).FindStringSubmatch(text) // "1 line lost"
	switch {
	case lost == 0 && gap != nil:
		t.Errorf("nothing lost, but a gap of %s lines is reported:\n%s", gap[1], text)
	case lost > 0 && (gap == nil || gap[1] != strconv.Itoa(lost)):
		t.Errorf("note says %d lines lost, the log's gap says %v:\n%s", lost, gap, text)
	}
}

// TestRestartKillsOrphanedGroup: nothing of a run without a live holder
// outlives the next flyd. After kill -9 of flyd and of the run's holder
// (or, with --hold-runs=false, of flyd alone), the app's leader dies too
// but its grandchild lives on in the run's process group; the next flyd
// still kills the group (by its members, not only its leader).
func TestRestartKillsOrphanedGroup(t *testing.T) {
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			e := flytest.NewEnv(t)
			e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvGrandchild+"=1")
			args := []string{fmt.Sprintf("--hold-runs=%v", held)}
			d := flytest.StartFlyd(t, e, args...)
			root := flutterProject(t)
			cs := viaShim(e)(t, "before", root, nil)
			var started mcpserver.RunResult
			if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
				t.Fatalf("flutter_run: %s", toolText(res))
			}
			gpid := grandchildPID(t, cs, started.LogURI)
			var listed mcpserver.RunsListResult
			callTool(t, cs, "runs_list", nil, &listed)
			ri, _ := findRun(listed.Runs, started.RunID)
			cs.Close()

			d.Kill(t)
			if held {
				st := heldState(t, e, started.RunID)
				if err := flytest.Signal(st.Holder.PID, syscall.SIGKILL); err != nil {
					t.Fatalf("kill the run's holder: %v", err)
				}
				waitGone(t, "the run's holder", st.Holder.PID)
			}
			if err := flytest.Signal(ri.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill the app's leader: %v", err)
			}
			waitGone(t, "the app's leader", ri.PID)
			if !alive(gpid) {
				t.Fatal("the grandchild died with its leader; the test needs it orphaned")
			}
			flytest.StartFlyd(t, e, args...)
			waitGone(t, "the orphaned grandchild of the killed flyd's run", gpid)
		})
	}
}

// TestRestartKeepsRuns: kill -9 flyd with a live run that ends with flyd
// (--hold-runs=false; a held one lives on, see TestCrashLosesNoLine); the
// next flyd marks the run interrupted, kills its leftover process group, keeps its log and
// continues its seq; a second flyd on the same state dir fails fast.
func TestRestartKeepsRuns(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	// The app prints a few lines, then goes quiet: an app that keeps
	// printing after flyd dies is killed by SIGPIPE, and this test needs
	// one that outlives its daemon.
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=10", fakeflutter.EnvLines+"=5")
	d := flytest.StartFlyd(t, e, "--hold-runs=false")
	root := flutterProject(t)
	cs := viaShim(e)(t, "before", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	var before string
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(before, "flutter: tick 5"); {
		if time.Now().After(deadline) {
			t.Fatalf("the app never printed its 5 lines:\n%s", before)
		}
		time.Sleep(20 * time.Millisecond)
		before, _ = readText(t, cs, started.LogURI)
	}
	// Wait until those lines are on disk, not only in the ring: lines of
	// the last commit window are lost by a kill -9, by design.
	for deadline := time.Now().Add(15 * time.Second); ; {
		_, meta := readText(t, cs, started.LogURI)
		if stored, _ := meta["stored_seq"].(float64); stored >= meta["last_seq"].(float64) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the log was not stored within 15s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	ri, _ := findRun(listed.Runs, started.RunID)
	cs.Close()

	d.Kill(t)
	if !alive(ri.PID) {
		t.Fatalf("the app died with flyd; the test needs it orphaned")
	}
	flytest.StartFlyd(t, e, "--hold-runs=false")
	waitGone(t, "orphaned app of the killed flyd", ri.PID)

	cs2 := viaShim(e)(t, "after", root, nil)
	callTool(t, cs2, "runs_list", nil, &listed)
	if ri, ok := findRun(listed.Runs, started.RunID); !ok || ri.State != "interrupted" {
		t.Fatalf("after restart run = %+v, want interrupted", ri)
	}
	after, meta := readText(t, cs2, started.LogURI)
	// Everything read before the kill is still there.
	for _, l := range strings.Split(strings.TrimSpace(before), "\n") {
		if !strings.Contains(after, l) {
			t.Fatalf("line %q lost across the restart", l)
		}
	}
	lines := strings.Split(strings.TrimSpace(after), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "marked interrupted") {
		t.Fatalf("last line after restart = %q, want flyd's interrupted note", last)
	}
	// Every line was stored before the kill: the note follows the last
	// one directly, with no gap and no seq skipped.
	prev, _ := strconv.Atoi(strings.Fields(lines[len(lines)-2])[0])
	seq, _ := strconv.Atoi(strings.Fields(last)[0])
	if seq != prev+1 || meta["last_seq"] != float64(seq) || strings.Contains(after, "lost") {
		t.Errorf("note seq %d after stored seq %d (last_seq %v), want the next seq and no gap:\n%s", seq, prev, meta["last_seq"], after)
	}

	// A second flyd on the same state dir fails fast.
	flyd, _ := flytest.Binaries(t)
	second := exec.Command(flyd, "run")
	second.Env = e.Vars
	start := time.Now()
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running") || time.Since(start) > 10*time.Second {
		t.Errorf("second flyd: %v after %v: %s", err, time.Since(start), out)
	}
}

// TestSlowSubscriberDoesNotDelayOthers: client A subscribes to a run's log
// and then stops reading its socket with megabytes of replies pending;
// client B, subscribed to the same log, keeps getting its updates on time.
func TestSlowSubscriberDoesNotDelayOthers(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=5")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	writeTree(t, root, map[string]string{"lib/big.dart": strings.Repeat("// padding padding\n", 50_000)}) // ~1 MB
	nb := newNotes()
	b := viaShim(e)(t, "reader", root, nb)
	var started mcpserver.RunResult
	if res := callTool(t, b, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}

	// A: a raw WebSocket client that subscribes, asks for 40 MB and never reads.
	ctx := context.Background()
	hc := e.HTTPClient()
	hc.Timeout = 0
	a, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient: hc, Subprotocols: []string{wire.Subprotocol},
		HTTPHeader: http.Header{wire.HeaderWorkspace: {url.QueryEscape(root)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	send := func(s string) {
		if err := a.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stuck","version":"0"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"` + started.LogURI + `"}}`)
	for i := range 40 {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"workspace:///lib/big.dart"}}`, i+2))
	}

	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: started.LogURI}); err != nil {
		t.Fatal(err)
	}
	// Measure B's updates for 3 s while A is stuck: the log grows every
	// 5 ms, so B should hear of it about every 50 ms. A design that wrote
	// to A inline would hold B up for A's whole write timeout (5 s).
	var gaps []time.Duration
	last := time.Now()
	for end := last.Add(3 * time.Second); time.Now().Before(end); {
		select {
		case u := <-nb.updated:
			if u == started.LogURI {
				gaps = append(gaps, time.Since(last))
				last = time.Now()
			}
		case <-time.After(5 * time.Second):
			t.Fatal("B got no log update for 5 s while A was stuck")
		}
	}
	slices.Sort(gaps)
	worst := gaps[len(gaps)-1]
	t.Logf("B: %d updates in 3 s while A was stuck; median gap %v, worst %v", len(gaps), gaps[len(gaps)/2], worst)
	// Held up by A would be a gap of A's write timeout (5 s); a loaded
	// machine makes gaps of a second or two without any holding up.
	if len(gaps) < 5 || worst > 4*time.Second {
		t.Errorf("B was held up: %d updates, worst gap %v", len(gaps), worst)
	}
}

// TestOneShotToolsAndLimits: devices, doctor, create (only with confirm),
// logs_read with grep, the live-run limit, and a missing flutter, each as
// a client sees them.
func TestOneShotToolsAndLimits(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=100")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "tools", root, nil)

	var devs mcpserver.DevicesResult
	if res := callTool(t, cs, "flutter_sdk", map[string]any{"command": "devices"}, &devs); res.IsError || len(devs.Devices) == 0 {
		t.Fatalf("flutter_devices = %+v %s, want devices", devs, toolText(res))
	}
	if d := devs.Devices[0]; d.ID == "" || d.TargetPlatform == "" {
		t.Errorf("device %+v lacks its id or platform", d)
	}
	var doc mcpserver.DoctorResult
	if res := callTool(t, cs, "flutter_sdk", map[string]any{"command": "doctor"}, &doc); res.IsError || doc.ExitCode != 0 || !strings.Contains(doc.Report, "Doctor summary") {
		t.Errorf("flutter_doctor = %+v %s", doc, toolText(res))
	}
	if strings.Contains(doc.Report, "started: ") || strings.Contains(doc.Report, "exited: ") {
		t.Errorf("flutter_doctor's report holds flyd's own lines:\n%s", doc.Report)
	}

	if res := callTool(t, cs, "flutter_sdk", map[string]any{"command": "create", "directory": "packages/demo_app"}, nil); !res.IsError || !strings.Contains(toolText(res), "confirm: true") {
		t.Errorf("flutter_create without confirm = %s, want a refusal asking for confirm", toolText(res))
	}
	if _, err := os.Stat(filepath.Join(root, "packages", "demo_app")); err == nil {
		t.Fatal("flutter_create wrote files without confirm")
	}
	if res := callTool(t, cs, "flutter_sdk", map[string]any{"command": "create", "directory": "../outside", "confirm": true}, nil); !res.IsError {
		t.Errorf("flutter_create outside the workspace succeeded")
	}
	var created mcpserver.CreateResult
	if res := callTool(t, cs, "flutter_create", map[string]any{"directory": "packages/demo_app", "confirm": true, "org": "dev.fly"}, &created); res.IsError {
		t.Fatalf("flutter_create: %s", toolText(res))
	}
	if _, err := os.Stat(filepath.Join(root, "packages", "demo_app", "pubspec.yaml")); err != nil {
		t.Errorf("flutter_create made no project: %v", err)
	}
	for _, bad := range []map[string]any{{"command": "upgrade"}, {"command": "devices", "directory": "x"}} {
		if res := callTool(t, cs, "flutter_sdk", bad, nil); !res.IsError || !strings.Contains(toolText(res), "command") {
			t.Errorf("flutter_sdk %v = %s, want a refusal naming the command", bad, toolText(res))
		}
	}

	// Two live runs per workspace; the third is refused with what to do.
	var r1, r2 mcpserver.RunResult
	callTool(t, cs, "flutter_run", nil, &r1)
	callTool(t, cs, "flutter_run", nil, &r2)
	if res := callTool(t, cs, "flutter_run", nil, nil); !res.IsError || !strings.Contains(toolText(res), "flutter_stop") {
		t.Errorf("third flutter_run = %s, want a limit error naming flutter_stop", toolText(res))
	}
	// An agent's read of a fresh run: the app's output and fly's notes,
	// none of flutter's machine events (half of the log) unless asked.
	var logs mcpserver.LogsReadResult
	res := callTool(t, cs, "logs_read", map[string]any{"run_id": r1.LogURI}, &logs)
	if text := toolText(res); res.IsError || strings.Contains(text, " event ") || !strings.Contains(text, " fly ") {
		t.Errorf("a default logs_read of a fresh run = %q, want no event lines and fly's notes", text)
	}
	all := callTool(t, cs, "logs_read", map[string]any{"run_id": r1.RunID, "events": true}, nil)
	if text := toolText(all); !strings.Contains(text, " event app.progress") || !strings.Contains(text, " event app.started") {
		t.Errorf("logs_read with events = %q, want app.progress and app.started", text)
	}
	res = callTool(t, cs, "logs_read", map[string]any{"run_id": r1.LogURI, "streams": []string{"event"}, "grep": "app\\.started"}, &logs)
	if res.IsError {
		t.Fatalf("logs_read: %s", toolText(res))
	}
	if text := toolText(res); logs.Entries != 1 || !strings.Contains(text, " event app.started") || strings.Count(text, "\n") != 0 {
		t.Errorf("logs_read grep app.started = %+v %q, want one event", logs, text)
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": r1.RunID}, nil)
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": r2.RunID}, nil)

	// A session whose PATH has no flutter gets an error that says how to fix it.
	bare := flytest.NewEnv(t)
	flytest.StartFlyd(t, bare)
	noFlutter := viaShim(bare)(t, "no-flutter", root, nil)
	res = callTool(t, noFlutter, "flutter_run", nil, nil)
	if msg := toolText(res); !res.IsError || !strings.Contains(msg, "flutter not found") || !strings.Contains(msg, "--flutter") {
		t.Errorf("flutter_run without flutter = %q, want how to install or point flyd at it", msg)
	}
}
