package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// viaShimWith is viaShim for a client whose environment adds vars: the
// runs it starts get them (the fake flutter reads its knobs there).
func viaShimWith(e *flytest.Env, vars ...string) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		_, flyctl := flytest.Binaries(t)
		cmd := exec.Command(flyctl, "mcp", "--workspace", workspace)
		cmd.Env = append(append([]string(nil), e.Vars...), vars...)
		cmd.Stderr = os.Stderr
		return connectClient(t, name, &mcp.CommandTransport{Command: cmd}, n)
	}
}

// TestHonestReloads: through the shim, a reload that makes the app throw
// returns the error in its own result, located; a clean one says there
// are no new errors; a rejected one is an error result that names hot
// restart; one that does not compile carries flutter's compile error.
func TestHonestReloads(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	start := func(cs *mcp.ClientSession) string {
		t.Helper()
		var run mcpserver.RunResult
		if res := callTool(t, cs, "flutter_run", nil, &run); res.IsError {
			t.Fatalf("flutter_run: %s", toolText(res))
		}
		t.Cleanup(func() { callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil) })
		return run.RunID
	}

	cs := viaShimWith(e, fakeflutter.EnvErrorsOnReload+"=overflow")(t, "agent", root, nil)
	id := start(cs)
	var out mcpserver.RestartResult
	res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": id}, &out)
	text := toolText(res)
	if res.IsError || !out.Applied || len(out.NewErrors) != 1 || out.NewErrors[0].Location != "lib/main.dart:30:12" ||
		!strings.Contains(text, "1 new error after its first frame:\n1× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12") {
		t.Errorf("a reload that throws = %+v\n%s", out, text)
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": id}, nil)

	clean := viaShim(e)(t, "clean", root, nil)
	id = start(clean)
	res = callTool(t, clean, "flutter_hot_reload", nil, &out) // no run_id: the live run of the workspace
	if text := toolText(res); res.IsError || !out.Applied || len(out.NewErrors) != 0 || !strings.Contains(text, "No new errors after its first frame.") {
		t.Errorf("a clean reload = %+v\n%s", out, text)
	}
	callTool(t, clean, "flutter_stop", map[string]any{"run_id": id}, nil)

	rej := viaShimWith(e, fakeflutter.EnvReloadReject+"=1")(t, "rejecting", root, nil)
	id = start(rej)
	res = callTool(t, rej, "flutter_hot_reload", map[string]any{"run_id": id}, &out)
	if text := toolText(res); !res.IsError || !out.Rejected || !strings.Contains(text, "Reload rejected: Const class cannot become non-const") ||
		!strings.Contains(text, "call flutter_hot_reload with restart: true") {
		t.Errorf("a rejected reload = %v %+v\n%s", res.IsError, out, text)
	}
	callTool(t, rej, "flutter_stop", map[string]any{"run_id": id}, nil)

	broken := viaShimWith(e, fakeflutter.EnvReloadFail+"=1")(t, "broken", root, nil)
	id = start(broken)
	res = callTool(t, broken, "flutter_hot_reload", map[string]any{"run_id": id}, &out)
	if text := toolText(res); !res.IsError || out.Applied || !strings.Contains(text, "lib/main.dart:12:3: Error: Expected ';' after this.") {
		t.Errorf("a reload that does not compile = %v %+v\n%s", res.IsError, out, text)
	}
}

// TestTwoAgentsOneApp: two sessions share a run. B's reload reaches A in
// A's next result about the run and in runs_list; B's claim makes A's
// reload refuse with B's name and note; A's force overrides it and is
// recorded; the claim ends with B's session. The errors resource is
// listed, readable and tells its subscriber when errors arrive, and A,
// which never subscribed, gets the same errors from the tool. With
// clients of either era, through the shim and over Streamable HTTP (where
// a 2026-07-28 client's session ends by idling: 2 s here).
func TestTwoAgentsOneApp(t *testing.T) {
	t.Parallel() // its own flyds
	eachClient(t, func(t *testing.T) *flytest.Env {
		e := flytest.NewEnv(t)
		e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvErrorsOnReload+"=nullcheck")
		flytest.StartFlyd(t, e, "--http-session-idle", "2s")
		return e
	}, twoAgentsOneApp)
}

func twoAgentsOneApp(t *testing.T, _ *flytest.Env, connect connector, era func() *notes) {
	root := flutterProject(t)
	a := connect(t, "claude-code", root, era())
	bNotes := era()
	b := connect(t, "cursor", root, bNotes)

	var run mcpserver.RunResult
	if res := callTool(t, a, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	t.Cleanup(func() { callTool(t, a, "flutter_stop", map[string]any{"run_id": run.RunID, "force": true}, nil) })
	errorsURI := "fly://runs/" + run.RunID + "/errors"
	if uris, _ := listAll(t, b); !strings.Contains(strings.Join(uris, " "), errorsURI) {
		t.Errorf("resources/list does not list %s", errorsURI)
	}
	bNotes.subscribe(t, b, errorsURI)

	// B reloads; the app throws; B's subscription is told.
	var out mcpserver.RestartResult
	if res := callTool(t, b, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, &out); res.IsError || len(out.NewErrors) != 1 {
		t.Fatalf("B's reload = %+v: %s", out, toolText(res))
	}
	bNotes.waitUpdated(t, errorsURI)
	if text, _ := readText(t, b, errorsURI); !strings.Contains(text, "Null check operator used on a null value — at lib/main.dart:31:28") &&
		!strings.Contains(text, "Null check operator used on a null value (thrown at lib/main.dart:31:28)") {
		t.Errorf("the errors resource = %q", text)
	}

	// A learns of it in its next result about the run, once.
	var errs mcpserver.ErrorsResult
	res := callTool(t, a, "flutter_errors", nil, &errs)
	if text := toolText(res); !strings.Contains(text, `Meanwhile: "cursor" #`) || !strings.Contains(text, "hot-reloaded this run") ||
		!strings.Contains(text, "applied, 1 new error") || len(errs.Errors) != 1 {
		t.Errorf("A's flutter_errors after B's reload:\n%s", text)
	}
	if text := toolText(callTool(t, a, "flutter_errors", nil, nil)); strings.Contains(text, "Meanwhile") {
		t.Errorf("A was told twice:\n%s", text)
	}
	var list mcpserver.RunsListResult
	callTool(t, b, "runs_list", nil, &list)
	if len(list.Runs) != 1 || list.Runs[0].LastAction == nil || list.Runs[0].LastAction.What != "hot reload" ||
		list.Runs[0].LastAction.By.Client != "cursor" || list.Runs[0].StartedBy == nil || list.Runs[0].StartedBy.Client != "claude-code" ||
		list.Runs[0].Errors == nil || list.Runs[0].Errors.Current != 1 {
		t.Errorf("runs_list = %+v", list.Runs)
	}

	// B claims the run: A's reload is refused with B's name and note.
	if res := callTool(t, b, "flutter_claim", map[string]any{"note": "bisecting the crash"}, nil); res.IsError {
		t.Fatalf("claim: %s", toolText(res))
	}
	res = callTool(t, a, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, `claimed by "cursor" #`) || !strings.Contains(text, `"bisecting the crash"`) ||
		!strings.Contains(text, "force: true") {
		t.Errorf("A's reload under B's claim = %v:\n%s", res.IsError, text)
	}
	list = mcpserver.RunsListResult{}
	listed := toolText(callTool(t, a, "runs_list", nil, &list))
	if c := list.Runs[0].Claim; c == nil || c.By.Client != "cursor" || c.Note != "bisecting the crash" {
		t.Errorf("runs_list's claim = %+v", c)
	}
	// Others see B under its handle, the id fly://sessions/current
	// gives, never its session id (over HTTP, the Mcp-Session-Id).
	current, _ := readText(t, b, "fly://sessions/current")
	var me struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(current), &me); err != nil || me.ID == "" {
		t.Fatalf("fly://sessions/current = %q: %v", current, err)
	}
	if !strings.Contains(listed, me.ID[:6]) {
		t.Errorf("runs_list does not name B by its handle %s:\n%s", me.ID, listed)
	}
	if id := b.ID(); id != "" && (strings.Contains(listed, id) || strings.Contains(current, id)) {
		t.Errorf("B's session id %s is shown: runs_list %s, fly://sessions/current %s", id, listed, current)
	}
	if res := callTool(t, a, "flutter_hot_reload", map[string]any{"run_id": run.RunID, "force": true}, &out); res.IsError || !out.Applied {
		t.Errorf("A's forced reload = %+v: %s", out, toolText(res))
	}
	list = mcpserver.RunsListResult{}
	callTool(t, b, "runs_list", nil, &list)
	if la := list.Runs[0].LastAction; la == nil || !la.Forced || la.By.Client != "claude-code" {
		t.Errorf("the forced reload's record = %+v", la)
	}
	if !strings.Contains(strings.Join(list.Others, "\n"), `"claude-code" #`) || !strings.Contains(strings.Join(list.Others, "\n"), "(overriding a claim)") {
		t.Errorf("B's runs_list news = %q", list.Others)
	}
	var logs mcpserver.LogsReadResult
	if text := toolText(callTool(t, a, "logs_read", map[string]any{"run_id": run.RunID, "grep": "forced over a claim"}, &logs)); logs.Entries != 1 {
		t.Errorf("the run's log does not record the forced reload:\n%s", text)
	}

	// The claim ends with B's session.
	b.Close()
	flytest.Eventually(t, "B's claim to end with its session", func() bool {
		list = mcpserver.RunsListResult{} // decoding into the old one would keep its claim
		callTool(t, a, "runs_list", nil, &list)
		return list.Runs[0].Claim == nil
	})
	if res := callTool(t, a, "flutter_hot_reload", map[string]any{"run_id": run.RunID, "restart": true}, &out); res.IsError || !out.Applied {
		t.Errorf("A's restart after B left = %+v: %s", out, toolText(res))
	}
	// The restart (a new isolate) keeps errors flowing.
	if len(out.NewErrors) != 1 {
		t.Errorf("the error after a hot restart = %+v", out.NewErrors)
	}
}

// TestWebErrorsReachAgents: a web run (structured errors off) prints the
// blocks in app.log; they become the same entries, located.
func TestWebErrorsReachAgents(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvErrorsAtStart+"=build,build")
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "agent", flutterProject(t), nil)
	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", map[string]any{"device": "chrome"}, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	defer callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil)
	var out mcpserver.ErrorsResult
	flytest.Eventually(t, "the web errors in flutter_errors", func() bool {
		callTool(t, cs, "flutter_errors", nil, &out)
		return out.Total == 2
	})
	if len(out.Errors) != 1 || out.Errors[0].Count != 2 || out.Errors[0].Location != "lib/main.dart:11:13" || out.Errors[0].Widget != "MyBrokenHomePage" {
		t.Errorf("web errors = %+v", out.Errors)
	}
}
