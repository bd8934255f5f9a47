package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFirstSessionEndToEnd is a new user's first session, on every OS
// (CI runs it for Windows under Wine, flyd.exe and flyctl.exe included):
// through the real shim, an agent lists the tools, reads the project's
// pubspec.yaml, starts the app with the fake flutter (a flutter.bat on
// Windows), reloads it, reads its log and stops it; then nothing the run
// started is left, its grandchild and its holder included.
func TestFirstSessionEndToEnd(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=50", fakeflutter.EnvGrandchild+"=1")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "first-day", root, nil)
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "flutter_run") {
		t.Fatalf("tools/list = %v, want flutter_run among them", names)
	}
	if text, _ := readText(t, cs, "workspace:///pubspec.yaml"); !strings.Contains(text, "name: demo") {
		t.Fatalf("workspace:///pubspec.yaml = %q", text)
	}

	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run); res.IsError || run.State != "running" {
		t.Fatalf("flutter_run = %+v: %s", run, toolText(res))
	}
	var reload mcpserver.RestartResult
	if res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, &reload); res.IsError || !reload.Applied {
		t.Fatalf("flutter_hot_reload = %+v: %s", reload, toolText(res))
	}
	var grandchild int
	flytest.Eventually(t, "the run's log holds its ticks and its grandchild", func() bool {
		var log mcpserver.LogsReadResult
		res := callTool(t, cs, "logs_read", map[string]any{"run_id": run.RunID}, &log)
		text := toolText(res)
		if m := regexp.MustCompile(`grandchild pid (\d+)`).FindStringSubmatch(text); m != nil {
			grandchild, _ = strconv.Atoi(m[1])
		}
		return !res.IsError && strings.Contains(text, "tick ") && grandchild > 0
	})
	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	ri, ok := findRun(listed.Runs, run.RunID)
	if !ok || ri.PID == 0 || !alive(ri.PID) || !alive(grandchild) {
		t.Fatalf("runs_list = %+v; want run %s with a live process, and its grandchild %d alive", listed.Runs, run.RunID, grandchild)
	}

	held := heldState(t, e, run.RunID).Holder.PID // the process that keeps the run across flyd's restarts
	if !alive(held) {
		t.Fatalf("the run's holder (pid %d) is not running", held)
	}

	var stopped mcpserver.StopResult
	if res := callToolWith(t, cs, &mcp.CallToolParams{Name: "flutter_stop", Arguments: map[string]any{"run_id": run.RunID}}, &stopped); res.IsError || stopped.State == "running" {
		t.Fatalf("flutter_stop = %+v: %s", stopped, toolText(res))
	}
	waitGone(t, "the stopped run's processes, its holder included", ri.PID, grandchild, held)
}
