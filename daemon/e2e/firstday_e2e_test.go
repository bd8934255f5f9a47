package e2e

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
)

// TestFirstDayCrash: through the shim, the app crashes; the read tools
// without run_id read the crashed run and say so first; the action tools
// answer with the same line and the next step. Then, with two runs live,
// flutter_stop without run_id stops the newer one.
func TestFirstDayCrash(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=100")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	// Three seconds after it started: flutter_run has answered by then,
	// even on a loaded machine (it took 2.2 s once, and a crash before
	// the answer is flutter_run's error, another test's case).
	cs := viaShimWith(e, fakeflutter.EnvCrashAfter+"=30")(t, "claude-code", root, nil)

	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	flytest.Eventually(t, "the app to crash", func() bool {
		var list mcpserver.RunsListResult
		callTool(t, cs, "runs_list", nil, &list)
		r, ok := findRun(list.Runs, run.RunID)
		return ok && !r.Live()
	})
	crashed := regexp.MustCompile(`^run ` + run.RunID + ` crashed (just now|\d+s ago): exit 255, "Lost connection to device\."\n`)

	var logs mcpserver.LogsReadResult
	res := callTool(t, cs, "logs_read", nil, &logs)
	t.Logf("logs_read, no run_id, after the crash:\n%s", toolText(res))
	if text := toolText(res); res.IsError || logs.RunID != run.RunID || logs.State != "failed" || !crashed.MatchString(text) || !strings.Contains(text, "Lost connection to device.") {
		t.Errorf("logs_read without run_id after the crash = %+v\n%s", logs, text)
	}
	var errs mcpserver.ErrorsResult
	res = callTool(t, cs, "flutter_errors", nil, &errs)
	t.Logf("flutter_errors, no run_id, after the crash:\n%s", toolText(res))
	if text := toolText(res); res.IsError || errs.RunID != run.RunID || !crashed.MatchString(text) {
		t.Errorf("flutter_errors without run_id after the crash = %+v\n%s", errs, text)
	}
	for _, tool := range []string{"flutter_hot_reload", "flutter_stop", "flutter_inspect"} {
		res := callTool(t, cs, tool, nil, nil)
		text := toolText(res)
		t.Logf("%s, no run_id, after the crash: %s", tool, text)
		if !res.IsError || !strings.HasPrefix(text, "no live run in this workspace: run "+run.RunID+" crashed ") ||
			!strings.Contains(text, `exit 255, "Lost connection to device."`) || !strings.HasSuffix(text, "start it again with flutter_run") {
			t.Errorf("%s without run_id after the crash = %v %q, want the crash in a line and the next step", tool, res.IsError, text)
		}
	}

	// Two runs of a client without the crash: stop without run_id stops
	// the newer, then the older.
	b := viaShim(e)(t, "cursor", root, nil)
	var older, newer mcpserver.RunResult
	callTool(t, b, "flutter_run", nil, &older)
	callTool(t, b, "flutter_run", nil, &newer)
	if older.State != "running" || newer.State != "running" {
		t.Fatalf("runs = %+v %+v, want both running", older, newer)
	}
	var stopped mcpserver.StopResult
	res = callTool(t, b, "flutter_stop", nil, &stopped)
	t.Logf("flutter_stop, no run_id: %s", toolText(res))
	if res.IsError || stopped.RunID != newer.RunID || stopped.State != "stopped" || toolText(res) != "run "+newer.RunID+" stopped: exit 0" {
		t.Errorf("flutter_stop without run_id = %+v %q, want the newer run %s stopped", stopped, toolText(res), newer.RunID)
	}
	var list mcpserver.RunsListResult
	callTool(t, b, "runs_list", nil, &list)
	if r, _ := findRun(list.Runs, older.RunID); r.State != "running" {
		t.Errorf("the older run is %s after a stop without run_id, want running", r.State)
	}
	if res := callTool(t, b, "flutter_stop", nil, &stopped); res.IsError || stopped.RunID != older.RunID {
		t.Errorf("the second flutter_stop without run_id = %+v %s", stopped, toolText(res))
	}
}

// TestFirstDayCompileError: a run and a build that do not compile answer
// with flutter's compile error first, without flutter's machine-protocol
// JSON or flutter_tools' stack, and name the log that keeps them.
func TestFirstDayCompileError(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvBuildFail+"=1")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "claude-code", root, nil)
	const compileError = "lib/main.dart:12:3: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^\n"
	clean := func(what, text string) {
		t.Helper()
		for _, bad := range []string{"{", "daemon.connected", "app.start", "app.progress", "#0 ", "package:flutter_tools/"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s's text holds %q:\n%s", what, bad, text)
			}
		}
	}

	var run mcpserver.RunResult
	res := callTool(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run)
	text := toolText(res)
	t.Logf("a flutter_run that does not compile:\n%s", text)
	if !res.IsError || !strings.HasPrefix(text, compileError) || !strings.Contains(text, "flutter run failed before the app started (exit 1): Build process failed") ||
		!strings.HasSuffix(text, "logs_read run_id="+run.RunID+" events=true") || run.State != "failed" {
		t.Errorf("a flutter_run that does not compile = %v %+v\n%s", res.IsError, run, text)
	}
	clean("flutter_run", text)
	if all := toolText(callTool(t, cs, "logs_read", map[string]any{"run_id": run.RunID, "events": true}, nil)); !strings.Contains(all, "package:flutter_tools/") || !strings.Contains(all, "event app.stop") {
		t.Errorf("the run's log lacks app.stop and its trace:\n%s", all)
	}

	var build mcpserver.BuildResult
	res = callTool(t, cs, "flutter_build", map[string]any{"platform": "apk"}, &build)
	text = toolText(res)
	t.Logf("a flutter_build that does not compile:\n%s", text)
	if !res.IsError || !strings.HasPrefix(text, compileError) || !strings.Contains(text, "flutter build apk failed (exit 1)") ||
		!strings.HasSuffix(text, "The whole log: logs_read run_id="+build.BuildID) || build.ExitCode != 1 {
		t.Errorf("a flutter_build that does not compile = %v %+v\n%s", res.IsError, build, text)
	}
	clean("flutter_build", text)
}

// TestFirstDayRunsList: runs_list answers in a short line a run, without
// URIs, its records in full in structuredContent; one-shot SDK commands
// are listed only when asked for, by runs_list and by flyctl runs.
func TestFirstDayRunsList(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "claude-code", root, nil)

	res := callTool(t, cs, "flutter_sdk", map[string]any{"command": "devices"}, nil)
	t.Logf("flutter_sdk devices:\n%s", toolText(res))
	if text := toolText(res); res.IsError || strings.Contains(text, "{") || !strings.Contains(text, "linux") {
		t.Errorf("flutter_sdk devices = %q, want a line a device", text)
	}
	res = callTool(t, cs, "flutter_sdk", map[string]any{"command": "doctor"}, nil)
	t.Logf("flutter_sdk doctor:\n%s", toolText(res))
	if text := toolText(res); res.IsError || strings.Contains(text, `"report"`) || !strings.Contains(text, "Doctor summary") {
		t.Errorf("flutter_sdk doctor = %q, want the report as text", text)
	}
	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	t.Cleanup(func() { callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil) })
	callTool(t, cs, "flutter_hot_reload", nil, nil)

	var list mcpserver.RunsListResult
	res = callTool(t, cs, "runs_list", nil, &list)
	text := toolText(res)
	t.Logf("runs_list (%d bytes):\n%s", len(text), text)
	lines := strings.Split(text, "\n")
	row := regexp.MustCompile(`^` + run.RunID[:7] + `\w*  running  linux  by "claude-code"  hot-reloaded (just now|\d+s ago) by "claude-code" #\w+: applied.*  no errors$`)
	if len(lines) != 2 || !row.MatchString(lines[0]) || lines[1] != "(2 flutter_sdk commands not listed: include_sdk: true lists them)" ||
		strings.Contains(text, "ws://") || len(text) > 300 {
		t.Errorf("runs_list text = %q, want the run in a line and the commands left out", text)
	}
	if len(list.Runs) != 1 || list.Runs[0].VMServiceURI == "" || list.Runs[0].DTDURI == "" || list.SDKLeftOut != 2 {
		t.Errorf("runs_list structured = %+v, want the run's record in full, 2 commands left out", list)
	}
	list = mcpserver.RunsListResult{}
	text = toolText(callTool(t, cs, "runs_list", map[string]any{"include_sdk": true}, &list))
	if len(list.Runs) != 3 || !strings.Contains(text, "  doctor  exited ") || !strings.Contains(text, "  devices  exited ") {
		t.Errorf("runs_list include_sdk = %q", text)
	}

	// flyctl runs lists the same records: the commands only with --all.
	_, flyctl := flytest.Binaries(t)
	flyctlRuns := func(args ...string) []wire.Run {
		t.Helper()
		cmd := exec.Command(flyctl, append([]string{"runs", "--json"}, args...)...)
		cmd.Env = e.Vars
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("flyctl runs %v: %v", args, err)
		}
		var l struct {
			Runs []wire.Run `json:"runs"`
		}
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("flyctl runs --json: %v\n%s", err, out)
		}
		return l.Runs
	}
	kinds := func(rs []wire.Run) (n map[string]int) {
		n = map[string]int{}
		for _, r := range rs {
			n[r.Kind]++
		}
		return n
	}
	if k := kinds(flyctlRuns("--workspace", root)); k["tool"] != 0 || k["run"] != 1 {
		t.Errorf("flyctl runs lists %v, want the run and no one-shot command", k)
	}
	if k := kinds(flyctlRuns("--all")); k["tool"] < 2 {
		t.Errorf("flyctl runs --all lists %v, want the commands too", k)
	}
}
