package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolPathsStayInside gives the tools that take paths a symlink out of
// the workspace: flutter_create must not write through it, and run and
// build must not read through it; --web-browser-flag, which can run a
// program, is refused.
func TestToolPathsStayInside(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"main.dart": "void main() {}\n", "defs.json": "{}"})
	mustSymlink(t, outside, filepath.Join(root, "lib", "link_out"))
	cs := viaShim(e)(t, "attacker", root, nil)

	res := callTool(t, cs, "flutter_create", map[string]any{"directory": "lib/link_out/x", "confirm": true}, nil)
	if !res.IsError || !strings.Contains(toolText(res), "symlink") {
		t.Errorf("flutter_create through a symlink out = %q, want a refusal that names the symlink", toolText(res))
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 2 {
		t.Errorf("flutter_create wrote outside the workspace: %v", ents)
	}
	for _, args := range []map[string]any{
		{"target": "lib/link_out/main.dart"},
		{"args": []string{"--dart-define-from-file=lib/link_out/defs.json"}},
		{"args": []string{"--web-browser-flag=--renderer-cmd-prefix=/bin/touch /tmp/pwned"}},
	} {
		if res := callTool(t, cs, "flutter_run", args, nil); !res.IsError {
			t.Errorf("flutter_run %v succeeded, want a refusal", args)
		}
	}
	if res := callTool(t, cs, "flutter_build", map[string]any{"platform": "web", "target": "lib/link_out/main.dart"}, nil); !res.IsError || !strings.Contains(toolText(res), "outside") {
		t.Errorf("flutter_build with a target outside = %q, want a refusal", toolText(res))
	}
	var runs mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &runs)
	if len(runs.Runs) != 0 {
		t.Errorf("refused calls started %d runs", len(runs.Runs))
	}
}

// TestSubscribeRefusesWhatReadRefuses subscribes to the URIs that a read
// refuses: one resolver decides for both.
func TestSubscribeRefusesWhatReadRefuses(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	parent := t.TempDir()
	root := filepath.Join(parent, "app")
	writeTree(t, parent, map[string]string{
		"app/lib/main.dart":   "void main() {}\n",
		"app/.env":            "TOKEN=x",
		"outside/secret.dart": "x",
		"outside.dart":        "x",
	})
	mustSymlink(t, filepath.Join(parent, "outside.dart"), filepath.Join(root, "lib", "link_out.dart"))
	mustSymlink(t, filepath.Join(parent, "outside"), filepath.Join(root, "lib", "dir_out"))
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "attacker", root, nil)
	for _, uri := range []string{
		"workspace:///lib/link_out.dart",
		"workspace:///lib/dir_out/secret.dart",
		"workspace:///%252e%252e/outside.dart",
		"workspace:///lib/%252e%252e/%252e%252e/outside.dart",
		"workspace:///\u2024\u2024/outside.dart", // one-dot leaders look like ".."
		"workspace:///\uff0e\uff0e/outside.dart", // fullwidth full stops
		"workspace:///../outside.dart",
		"workspace:///.env",
		"workspace:///lib/missing.dart",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, rerr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		serr := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		cancel()
		if rerr == nil {
			t.Errorf("read %q succeeded", uri)
		}
		if serr == nil {
			t.Errorf("subscribe %q succeeded, but read refuses it (%v)", uri, rerr)
			continue
		}
		var re, se *jsonrpc.Error
		if errors.As(rerr, &re) && errors.As(serr, &se) && re.Code != se.Code {
			t.Errorf("%q: read refused with %d, subscribe with %d", uri, re.Code, se.Code)
		}
	}
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "workspace:///lib/main.dart"}); err != nil {
		t.Errorf("subscribe to a served file: %v", err)
	}
}

// TestHardLinksNotServed: a hard link in the workspace to a file outside
// it is neither listed nor read.
func TestHardLinksNotServed(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	parent := t.TempDir()
	root := filepath.Join(parent, "app")
	writeTree(t, parent, map[string]string{
		"app/lib/main.dart":   "void main() {}\n",
		"credentials.json":    "OUTSIDE-MARKER",
		"app/lib/single.dart": "ok",
	})
	if err := os.Link(filepath.Join(parent, "credentials.json"), filepath.Join(root, "lib", "linked.dart")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "attacker", root, nil)
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(r.URI, "linked.dart") {
			t.Errorf("hard link listed: %s", r.URI)
		}
	}
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "workspace:///lib/linked.dart"})
	if err == nil || !strings.Contains(err.Error(), "hard link") {
		t.Errorf("read of a hard link = %v, want a refusal naming hard links", err)
	}
	if text, _ := readText(t, cs, "workspace:///lib/single.dart"); text != "ok" {
		t.Errorf("single.dart = %q", text)
	}
}

// TestRunGetsClientEnv: a run sees the variables of the client that
// started it (here CHROME_EXECUTABLE, which flyd does not have), not those
// flyd was started with.
func TestRunGetsClientEnv(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvPrintEnv+"=CHROME_EXECUTABLE,FLYD_ONLY,FLY_SOCKET")
	flyEnv := append([]string{}, e.Vars...)
	e.Vars = append(e.Vars, "FLYD_ONLY=daemon")
	flytest.StartFlyd(t, e)
	e.Vars = append(flyEnv, "CHROME_EXECUTABLE=/opt/client-chrome")
	root := flutterProject(t)
	cs := viaShim(e)(t, "client", root, nil)

	var out mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &out); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	defer callTool(t, cs, "flutter_stop", map[string]any{"run_id": out.RunID}, nil)
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(text, "env FLY_SOCKET=") && time.Now().Before(deadline) {
		res := callTool(t, cs, "logs_read", map[string]any{"run_id": out.RunID, "grep": "flutter: env "}, nil)
		text = toolText(res)
	}
	for _, want := range []string{"env CHROME_EXECUTABLE=/opt/client-chrome", "env FLYD_ONLY=<unset>", "env FLY_SOCKET=<unset>"} {
		if !strings.Contains(text, want) {
			t.Errorf("run's log lacks %q:\n%s", want, text)
		}
	}
}

// TestListChangedPerWorkspace: a run announces list_changed to the
// sessions of its workspace once at its start and once at its end, and
// never to sessions of another workspace.
func TestListChangedPerWorkspace(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	rootA, rootB := flutterProject(t), flutterProject(t)
	na, nb := newNotes(), newNotes()
	a := viaShim(e)(t, "a", rootA, na)
	b := viaShim(e)(t, "b", rootB, nb)

	var out mcpserver.RunResult
	if res := callTool(t, a, "flutter_run", nil, &out); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	callTool(t, a, "flutter_stop", map[string]any{"run_id": out.RunID}, nil)
	// A session's notifications go out through its own queue, beside the
	// replies: wait for the two, then one more round trip on each session
	// lets any later one arrive.
	flytest.Eventually(t, "the start's and the end's list_changed", func() bool { return len(na.listChanged) >= 2 })
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.Ping(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(na.listChanged); n != 2 {
		t.Errorf("session on the run's workspace got %d list_changed for one run, want 2 (start, end)", n)
	}
	if n := len(nb.listChanged); n != 0 {
		t.Errorf("session on another workspace got %d list_changed", n)
	}
}

// TestWorkspaceRootRecreated deletes a session's workspace root and makes
// it again (git clone over it, a script's rm -rf): the open session sees
// the new files and reads them, without reconnecting.
func TestWorkspaceRootRecreated(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	parent := t.TempDir()
	root := filepath.Join(parent, "app")
	writeTree(t, root, map[string]string{"lib/old.dart": "old"})
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	n := newNotes()
	cs := viaShim(e)(t, "editor", root, n)
	if text, _ := readText(t, cs, "workspace:///lib/old.dart"); text != "old" {
		t.Fatalf("old.dart = %q", text)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	writeTree(t, root, map[string]string{"lib/new.dart": "new"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var uris []string
		for r, err := range cs.Resources(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		listed := strings.Join(uris, " ")
		if strings.Contains(listed, "lib/new.dart") && !strings.Contains(listed, "lib/old.dart") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after re-creating the root, the session lists %v, want lib/new.dart only", uris)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if text, _ := readText(t, cs, "workspace:///lib/new.dart"); text != "new" {
		t.Errorf("new.dart = %q", text)
	}
	// Changes under the new root are followed too.
	writeTree(t, root, map[string]string{"lib/later.dart": "later"})
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "workspace:///lib/later.dart"})
		if err == nil && res.Contents[0].Text == "later" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a file made under the re-created root is not served: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// defaultTextBudget is the text a tool returns by default, about 16 KB,
// as the tools' descriptions promise.
const defaultTextBudget = 16 << 10

// TestLogsReadDefaultIsSmall: logs_read with only a run id returns the
// newest lines within about 16 KB, as plain text, and says how to page.
func TestLogsReadDefaultIsSmall(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvLinesPerSec+"=0", fakeflutter.EnvLines+"=3000")
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "agent", flutterProject(t), nil)
	var out mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &out); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	defer callTool(t, cs, "flutter_stop", map[string]any{"run_id": out.RunID}, nil)
	var page mcpserver.LogsReadResult
	res := callTool(t, cs, "logs_read", map[string]any{"run_id": out.RunID}, &page)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(toolText(res), "flutter: tick 3000"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never reached tick 3000:\n%s", toolText(res))
		}
		res = callTool(t, cs, "logs_read", map[string]any{"run_id": out.RunID}, &page)
	}
	wire, _ := json.Marshal(res)
	text := toolText(res)
	t.Logf("default logs_read: %d bytes of text, %d bytes on the wire, %d entries of %d", len(text), len(wire), page.Entries, page.LastSeq)
	if len(text) > defaultTextBudget+200 || len(wire) > 2*defaultTextBudget {
		t.Errorf("default logs_read: %d bytes of text, %d on the wire, want about 16 KB", len(text), len(wire))
	}
	if !page.Truncated || page.FromSeq <= 1 || !strings.HasPrefix(text, "… older entries left out: call again with before=") {
		t.Errorf("default page %+v does not say how to page back:\n%.200s", page, text)
	}
	if strings.Contains(text, `{"seq"`) {
		t.Error("entries are JSON, want plain text lines")
	}
}

// TestRunLimitUnderConcurrency: eight flutter_run calls at once on a
// workspace with the default limit of two live runs start exactly two.
// The limit used to be checked apart from the start, so concurrent calls
// could all pass it.
func TestRunLimitUnderConcurrency(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "racer", root, nil)
	const calls = 8
	errs := make(chan bool, calls)
	for range calls {
		go func() { // owned by the test: each sends one result
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "flutter_run"})
			errs <- err != nil || res.IsError
		}()
	}
	started := 0
	for range calls {
		if failed := <-errs; !failed {
			started++
		}
	}
	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	live := 0
	for _, r := range listed.Runs {
		if r.Live() {
			live++
			callTool(t, cs, "flutter_stop", map[string]any{"run_id": r.RunID}, nil)
		}
	}
	if started != 2 || live != 2 {
		t.Errorf("%d concurrent flutter_run calls started %d runs (%d live), want exactly 2", calls, started, live)
	}
}
