package upstream_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolNames lists what a session's tools/list offers.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// refusal calls a tool the session's filter leaves out and returns what
// the agent reads.
func refusal(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s was not refused: %+v", tool, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestToolFilters: clients of one flyd each see the tools they asked for,
// flyd's and the upstream's alike, through the shim and Streamable HTTP;
// a call to a tool left out is refused with the filter that left it out.
func TestToolFilters(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	ws := newWorkspace(t)

	all := u.connect(t, "all", ws)
	toolsWith(t, all.cs, "flutter_run", "files_grep", "flutter_sdk", "fake_echo", "fake_slow")
	names := toolNames(t, all.cs)

	// The app preset, and of the upstream all but fake_slow.
	app := u.connect(t, "app", ws, "--tools", "app,fake", "--disable", "fake_s*")
	got := toolNames(t, app.cs)
	want := []string{"flutter_errors", "flutter_hot_reload", "flutter_run", "flutter_stop", "logs_read", "runs_list"}
	for _, n := range names {
		if strings.HasPrefix(n, "fake_") && !strings.HasPrefix(n, "fake_s") {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("--tools app,fake --disable fake_s* lists %v, want %v", got, want)
	}
	if text := refusal(t, app.cs, "files_grep", map[string]any{"pattern": "main"}); !strings.Contains(text, "tools=app,fake") {
		t.Errorf("files_grep outside the preset: %q, want the filter named", text)
	}
	if text := refusal(t, app.cs, "fake_slow", map[string]any{"steps": 1}); !strings.Contains(text, `"fake_s*"`) {
		t.Errorf("a disabled upstream tool: %q, want the term named", text)
	}
	if text := callText(t, app, "fake_echo", map[string]any{"text": "hi"}); !strings.Contains(text, "hi") {
		t.Errorf("fake_echo through the filter = %s", text)
	}
	// The other session is not touched by this one's filter.
	if got := toolNames(t, all.cs); !slices.Equal(got, names) {
		t.Errorf("the unfiltered session now lists %v, was %v", got, names)
	}

	// The files preset over Streamable HTTP, with a category disabled.
	st, err := flytest.Status(u.e)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(u.e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"workspace": {ws}, "tools": {"files,upstream"}, "disable": {"fake"}}
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + st.HTTP + wire.RouteStreamable + "?" + q.Encode(),
		HTTPClient: &http.Client{Transport: flytest.Bearer{Token: strings.TrimSpace(string(tok)), Base: http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs, err := mcp.NewClient(&mcp.Implementation{Name: "http", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if got := toolNames(t, hs); !slices.Equal(got, []string{"files_find", "files_grep", "files_read"}) {
		t.Errorf("?tools=files,upstream&disable=fake lists %v", got)
	}
	if text := refusal(t, hs, "fake_echo", map[string]any{"text": "x"}); !strings.Contains(text, `"fake"`) {
		t.Errorf("fake_echo over HTTP: %q", text)
	}

	// A term that names nothing is refused at once, not silently.
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", ws, "--tools", "ap")
	cmd.Env = u.e.Vars
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"ap" is no preset`) {
		t.Errorf("flyctl mcp --tools ap: %v\n%s", err, out)
	}
}
