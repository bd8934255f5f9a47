package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// call calls a tool, decodes its structured result into out (when not
// nil) and returns the result and its text.
func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

// TestLastRunIsTheDefault: once the app crashed, the read tools without
// run_id read the crashed run and say what became of it in their first
// line; the action tools answer with that line and what to do next.
func TestLastRunIsTheDefault(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "agent", nil)
	if res, text := call(t, cs, "flutter_hot_reload", nil, nil); !res.IsError || !strings.Contains(text, "no run in this workspace yet") || !strings.Contains(text, "flutter_run") {
		t.Errorf("a reload before any run = %v %q, want that there is none and flutter_run", res.IsError, text)
	}

	r := s.start(t, fakeflutter.EnvCrashAfter+"=2", fakeflutter.EnvTickMS+"=10")
	<-r.Done()
	crashed := regexp.MustCompile(`^run ` + r.ID() + ` crashed (just now|\d+s ago): exit 255, "Lost connection to device\."\n`)

	var logs LogsReadResult
	res, text := call(t, cs, "logs_read", nil, &logs)
	if res.IsError || logs.RunID != r.ID() || !crashed.MatchString(text) || !strings.Contains(text, "flutter: tick 2") {
		t.Errorf("logs_read without run_id after a crash = %+v\n%s", logs, text)
	}
	var errs ErrorsResult
	res, text = call(t, cs, "flutter_errors", nil, &errs)
	if res.IsError || errs.RunID != r.ID() || !crashed.MatchString(text) || !strings.Contains(text, "Bad state: fake crash") {
		t.Errorf("flutter_errors without run_id after a crash = %+v\n%s", errs, text)
	}

	for _, tool := range []string{"flutter_hot_reload", "flutter_stop", "flutter_inspect", "flutter_claim"} {
		res, text := call(t, cs, tool, nil, nil)
		if !res.IsError || !strings.HasPrefix(text, "no live run in this workspace: run "+r.ID()+" crashed ") ||
			!strings.Contains(text, `exit 255, "Lost connection to device."`) || !strings.Contains(text, "start it again with flutter_run") {
			t.Errorf("%s without run_id after a crash = %v %q, want the crash and the next step", tool, res.IsError, text)
		}
	}
	// The resources list the crashed run's log and errors, saying what
	// became of it; reading its log says so too.
	list, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	said := map[string]string{}
	for _, res := range list.Resources {
		said[res.URI] = res.Description
	}
	line := regexp.MustCompile(`^run ` + r.ID() + ` crashed (just now|\d+s ago): exit 255, "Lost connection to device\."\. `)
	for _, uri := range []string{runs.LogURI(store.KindRun, r.ID()), runs.ErrorsURI(r.ID())} {
		if d, ok := said[uri]; !ok || !line.MatchString(d) {
			t.Errorf("resources/list: %s listed %v with %q, want it said the run crashed", uri, ok, d)
		}
	}
	read, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: runs.LogURI(store.KindRun, r.ID())})
	if err != nil || !crashed.MatchString(fmt.Sprint(read.Meta["ended"])+"\n") {
		t.Errorf("reading the crashed run's log: _meta.ended = %v, %v", read.Meta["ended"], err)
	}

	// Named, it answers the same.
	if res, text := call(t, cs, "flutter_hot_reload", map[string]any{"run_id": r.ID()}, nil); !res.IsError ||
		!strings.HasPrefix(text, "run "+r.ID()+" crashed ") || !strings.Contains(text, "start it again with flutter_run") {
		t.Errorf("a reload of the crashed run = %v %q", res.IsError, text)
	}
}

// TestStopWithoutRunID: flutter_stop without run_id stops the newest live
// run, and says so in a line; with none live it says what became of the
// last one.
func TestStopWithoutRunID(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "stopper", nil)
	older := s.start(t, fakeflutter.EnvTickMS+"=0")
	newer := s.start(t, fakeflutter.EnvTickMS+"=0")

	var out StopResult
	res, text := call(t, cs, "flutter_stop", nil, &out)
	if res.IsError || out.RunID != newer.ID() || out.State != "stopped" || text != "run "+newer.ID()+" stopped: exit 0" {
		t.Fatalf("flutter_stop without run_id = %+v %q, want the newer run %s stopped", out, text, newer.ID())
	}
	if !older.Live() {
		t.Fatal("flutter_stop stopped the older run too")
	}
	res, text = call(t, cs, "flutter_stop", nil, &out)
	if res.IsError || out.RunID != older.ID() {
		t.Fatalf("the second flutter_stop = %+v %q, want the older run", out, text)
	}
	res, text = call(t, cs, "flutter_stop", nil, nil)
	if !res.IsError || !strings.HasPrefix(text, "no live run in this workspace: run "+older.ID()+" stopped ") || !strings.Contains(text, `by "stopper"`) {
		t.Errorf("flutter_stop with none live = %v %q", res.IsError, text)
	}
}

// TestRunsListText: runs_list's text is a short line a run, without URIs,
// its JSON in structuredContent; one-shot SDK commands are listed only
// when asked for.
func TestRunsListText(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connectFlutter(t, "claude-code", fakeflutter.EnvTickMS+"=0")
	var run RunResult
	if res, text := call(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run); res.IsError {
		t.Fatalf("flutter_run: %s", text)
	}
	if res, text := call(t, cs, "flutter_sdk", map[string]any{"command": "devices"}, nil); res.IsError || strings.Contains(text, "{") || !strings.Contains(text, "linux") {
		t.Errorf("flutter_sdk devices = %q, want a line a device", text)
	}
	if _, text := call(t, cs, "flutter_hot_reload", nil, nil); !strings.Contains(text, "applied") {
		t.Fatalf("reload: %s", text)
	}

	var list RunsListResult
	_, text := call(t, cs, "runs_list", nil, &list)
	line := regexp.MustCompile(`^` + run.RunID[:7] + `\w*  running  linux  by "claude-code"  hot-reloaded (just now|\d+s ago) by "claude-code" #hs\d: [^\n]*  no errors\n` +
		`\(1 flutter_sdk command not listed: include_sdk: true lists them\)$`)
	if !line.MatchString(text) || strings.Contains(text, "ws://") || len(text) > 200 {
		t.Errorf("runs_list text (%d bytes) = %q, want one line for the run, no URIs", len(text), text)
	}
	if len(list.Runs) != 1 || list.Runs[0].RunID != run.RunID || list.Runs[0].VMServiceURI == "" || list.SDKLeftOut != 1 {
		t.Errorf("runs_list structured = %+v, want the run in full and one command left out", list)
	}
	list = RunsListResult{}
	_, text = call(t, cs, "runs_list", map[string]any{"include_sdk": true}, &list)
	if len(list.Runs) != 2 || list.Runs[0].Kind != "tool" || !strings.Contains(text, "  devices  exited") {
		t.Errorf("runs_list include_sdk = %+v\n%s", list.Runs, text)
	}

	// A short id works as run_id.
	if res, text := call(t, cs, "logs_read", map[string]any{"run_id": strings.Fields(text)[0], "tail": 1}, nil); res.IsError {
		t.Errorf("logs_read of a short id: %s", text)
	}
	var stopped StopResult
	if res, text := call(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID[:9]}, &stopped); res.IsError || stopped.RunID != run.RunID {
		t.Errorf("flutter_stop of a prefix = %+v %s", stopped, text)
	}
	_, text = call(t, cs, "runs_list", nil, nil)
	if !regexp.MustCompile(`^\w+  stopped (just now|\d+s ago) by "claude-code" #hs\d  linux  by "claude-code"\n`).MatchString(text) {
		t.Errorf("runs_list of a stopped run = %q", text)
	}
}

// TestFailedRunReadsLikeAPerson: a run that does not compile answers
// with flutter's compile error first, without machine-protocol JSON or
// flutter_tools' stack, and names its log.
func TestFailedRunReadsLikeAPerson(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connectFlutter(t, "agent", fakeflutter.EnvBuildFail+"=1")
	var run RunResult
	res, text := call(t, cs, "flutter_run", map[string]any{"device": "linux"}, &run)
	want := "lib/main.dart:12:3: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^\n" +
		"flutter run failed before the app started (exit 1): Build process failed\n" +
		"The whole log, with flutter's events and traces: logs_read run_id=" + run.RunID + " events=true"
	if !res.IsError || text != want || run.State != "failed" {
		t.Errorf("a failed flutter_run = %v %+v\n%s\nwant\n%s", res.IsError, run, text, want)
	}
	for _, bad := range []string{"{", "#0", "package:flutter_tools", "daemon.connected", "app.progress"} {
		if strings.Contains(text, bad) {
			t.Errorf("a failed flutter_run's text holds %q", bad)
		}
	}
	var logs LogsReadResult
	if _, all := call(t, cs, "logs_read", map[string]any{"run_id": run.RunID, "events": true}, &logs); !strings.Contains(all, "package:flutter_tools") {
		t.Errorf("the log lacks the trace:\n%s", all)
	}
}

func TestWithNews(t *testing.T) {
	for _, tt := range []struct {
		news []string
		want string
	}{
		{nil, "text"},
		{[]string{`"b" #1 hot-reloaded this run 2s ago: applied`}, "Meanwhile: \"b\" #1 hot-reloaded this run 2s ago: applied\ntext"},
		{[]string{"a", "b"}, "Meanwhile:\n- a\n- b\ntext"},
	} {
		if got := withNews(tt.news, "text"); got != tt.want {
			t.Errorf("withNews(%q) = %q, want %q", tt.news, got, tt.want)
		}
	}
}

func TestShortIDs(t *testing.T) {
	if n := len(store.NewRunID()); n != runIDLen {
		t.Errorf("a run id is %d characters, runIDLen %d", n, runIDLen)
	}
	got := shortIDs([]string{"01jq3v6aaaaaaaaaaa", "01jq3v6abbbbbbbbbb", "01jq4zzzzzzzzzzzzz", "01kaaaaaaaaaaaaaaa"})
	want := map[string]string{"01jq3v6aaaaaaaaaaa": "01jq3v6aa", "01jq3v6abbbbbbbbbb": "01jq3v6ab", "01jq4zzzzzzzzzzzzz": "01jq4zz", "01kaaaaaaaaaaaaaaa": "01kaaaa"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("shortIDs()[%s] = %q, want %q", id, got[id], w)
		}
	}
}
