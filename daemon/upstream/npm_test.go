package upstream_test

//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// npmUpstreams starts flyd with the real third-party servers from npm as
// upstreams (pinned in testdata/conformance): server-everything as
// "everything" and server-filesystem, with no directory of its own, as
// "fs": it serves the roots flyd gives it.
func npmUpstreams(t *testing.T) *upEnv {
	t.Helper()
	dir := flytest.ConformanceDir(t)
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	pkg := func(name string) string {
		return filepath.Join(dir, "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
	}
	e := flytest.NewEnv(t)
	cfg := map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{pkg("server-everything"), "stdio"}},
		"fs":         map[string]any{"command": node, "args": []string{pkg("server-filesystem")}},
	}}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.Upstreams(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return &upEnv{e: e, flyd: flytest.StartFlyd(t, e)}
}

// textOf returns a function that takes a tool call's results and gives
// its text, failing the test on an error.
func textOf(t *testing.T) func(*mcp.CallToolResult, error) string {
	return func(res *mcp.CallToolResult, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		if res.IsError {
			t.Fatalf("tool failed: %s", strings.Join(parts, "\n"))
		}
		return strings.Join(parts, "\n")
	}
}

func TestUpstreamServerEverything(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := npmUpstreams(t)
	ws := newWorkspace(t)
	c1, c2 := u.connect(t, "c1", ws), u.connect(t, "c2", ws)
	ctx := context.Background()

	byName := toolsWith(t, c1.cs, "everything_echo", "everything_get-sum", "everything_trigger-long-running-operation", "fs_read_text_file", "flutter_run")
	if a := byName["fs_read_text_file"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Fatalf("fs_read_text_file lost its annotations: %+v", a)
	}

	if got := textOf(t)(c2.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_echo", Arguments: map[string]any{"message": "hi"}})); got != "Echo: hi" {
		t.Fatalf("everything_echo = %q", got)
	}
	// Servers of the TypeScript SDK 1.x answer server/discover with an
	// error, and are spoken to in the handshake era, at the first start.
	st, err := getStatus(u.e)
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range st.Upstreams {
		if up.State == "running" && (up.Protocol != "2025-11-25" || up.Restarts != 0) {
			t.Fatalf("upstream %s: protocol %q after %d restarts, want 2025-11-25 at once", up.Name, up.Protocol, up.Restarts)
		}
	}

	// Progress comes back to the caller, with its token.
	p := &mcp.CallToolParams{Name: "everything_trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	p.SetProgressToken("tok-c1")
	textOf(t)(c1.cs.CallTool(ctx, p))
	for range 3 {
		if pg := waitFor(t, "progress", c1.progress); pg.ProgressToken != "tok-c1" {
			t.Fatalf("progress token = %v, want tok-c1", pg.ProgressToken)
		}
	}

	// Sampling goes to the session whose call asked for it.
	if got := textOf(t)(c2.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_trigger-sampling-request", Arguments: map[string]any{"prompt": "hello"}})); !strings.Contains(got, "sampled by c2") {
		t.Fatalf("sampling result = %q; want c2's answer", got)
	}
	// So does elicitation.
	if got := textOf(t)(c1.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_trigger-elicitation-request"})); !strings.Contains(got, "User declined") {
		t.Fatalf("elicitation result = %q; want c1's decline", got)
	}
	// Roots are the workspace.
	root, _ := filepath.EvalSymlinks(ws)
	if got := textOf(t)(c1.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_get-roots-list"})); !strings.Contains(got, "file://"+root) {
		t.Fatalf("roots = %q; want %s", got, root)
	}

	// Resources: listed after flyd's own, read by URI and by template.
	uris := listAll(t, c1.cs)
	if !slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "demo://resource/static/document/") }) {
		t.Fatalf("resources/list has no demo:// documents: %v", uris)
	}
	if text := readText(t, c1.cs, "demo://resource/dynamic/text/3"); !strings.Contains(text, "3") {
		t.Fatalf("dynamic text 3 = %q", text)
	}

	// Prompts and completion.
	pr, err := c1.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything_args-prompt", Arguments: map[string]string{"city": "Lyon"}})
	if err != nil || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Lyon") {
		t.Fatalf("args-prompt = %+v, %v", pr, err)
	}
	comp, err := c1.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "everything_completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "En"}})
	if err != nil || !slices.Contains(comp.Completion.Values, "Engineering") {
		t.Fatalf("completion = %+v, %v", comp, err)
	}

	// Subscriptions: both get the upstream's updates; after one leaves,
	// the other still does.
	const uri = "demo://resource/dynamic/text/1"
	for _, c := range []*upClient{c1, c2} {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	textOf(t)(c1.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_toggle-subscriber-updates"}))
	for _, c := range []*upClient{c1, c2} {
		if got := waitFor(t, "updated", c.updated); got != uri {
			t.Fatalf("updated %s, want %s", got, uri)
		}
	}
	if err := c1.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	for len(c2.updated) > 0 {
		<-c2.updated
	}
	waitFor(t, "updated after c1 left", c2.updated)
}

func TestUpstreamServerFilesystemGetsTheWorkspace(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := npmUpstreams(t)
	wsA, wsB := newWorkspace(t), newWorkspace(t)
	a, b := u.connect(t, "a", wsA), u.connect(t, "b", wsB)
	ctx := context.Background()
	for ws, c := range map[string]*upClient{wsA: a, wsB: b} {
		root, _ := filepath.EvalSymlinks(ws)
		// server-filesystem asks for roots once initialized, without
		// holding calls meanwhile: its first answers may come before.
		eventually(t, "server-filesystem allowing "+root, func() bool {
			res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_list_allowed_directories"})
			return err == nil && strings.Contains(textOf(t)(res, err), root)
		})
		if got := textOf(t)(c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "lib", "main.dart")}})); got != "void main() {}\n" {
			t.Fatalf("read through fs = %q", got)
		}
	}
	st, err := getStatus(u.e)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, up := range st.Upstreams {
		if up.Name == "fs" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d fs upstreams for two workspaces, want 2: %+v", n, st.Upstreams)
	}
}
