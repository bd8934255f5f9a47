package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wine"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestExposedName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := strings.Repeat("analyze_", 12)
	for _, tc := range []struct{ prefix, name, want string }{
		{"dart", "analyze_files", "dart_analyze_files"},
		{"fs", "read.file/v2", "fs_read_file_v2"},
		{"x", "héllo", "x_h_llo"},
	} {
		if got := exposedName(tc.prefix, tc.name); got != tc.want {
			t.Errorf("exposedName(%q, %q) = %q, want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
	a, b := exposedName("dart", long+"a"), exposedName("dart", long+"b")
	if a == b || !valid.MatchString(a) || !valid.MatchString(b) {
		t.Fatalf("long names: %q and %q; want two valid, different names", a, b)
	}
}

type mapCache map[string][]byte

func (m mapCache) GetCache(k string) ([]byte, error) {
	if v, ok := m[k]; ok {
		return v, nil
	}
	return nil, os.ErrNotExist
}
func (m mapCache) PutCache(k string, v []byte) error { m[k] = v; return nil }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "upstreams.json")
	if s, err := Load(p, nil); err != nil || s != nil {
		t.Fatalf("Load of a missing file = %v, %v; want nothing", s, err)
	}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers":{"a":{"command":"x"},"a_b":{"command":"y"}}}`, 0o600)
	if s, err := Load(p, nil); err != nil || len(s) != 2 {
		t.Fatalf("Load = %v, %v", s, err)
	}
	// Tools seen before: a's "b_c" and a_b's "c" would both be a_b_c.
	cache := mapCache{}
	for name, tool := range map[string]string{"a": "b_c", "a_b": "c"} {
		b, _ := json.Marshal(lists{Tools: []*mcp.Tool{{Name: tool}}})
		cache[cacheKey(name)] = b
	}
	if _, err := Load(p, cache); err == nil || !strings.Contains(err.Error(), "servers a and a_b both give a tool named a_b_c") {
		t.Fatalf("Load with colliding cached tools = %v", err)
	}
	write(`{"mcpServers":{"a":{"command":"x"}}}`, 0o600)
	wine.SkipUnder(t, "it keeps no access list on a file (it makes one up from the Unix mode, which no Windows call here changes): no file is writable by others")
	flytest.LetOthersWrite(t, p)
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("Load of a world-writable file = %v", err)
	}
}

// memProc is an upstream served in this process over pipes.
type memProc struct {
	id     string
	stdin  io.WriteCloser
	stdout io.ReadCloser
	done   chan struct{}
}

func (p *memProc) ID() string                             { return p.id }
func (p *memProc) PID() int                               { return 1 }
func (p *memProc) Stdio() (io.WriteCloser, io.ReadCloser) { return p.stdin, p.stdout }
func (p *memProc) Done() <-chan struct{}                  { return p.done }
func (p *memProc) Tail(int) []string                      { return nil }
func (p *memProc) Stop(context.Context) error {
	p.stdin.Close()
	<-p.done
	return nil
}

// serveMem starts srv on pipes and returns it as a Process.
func serveMem(t *testing.T, srv *mcp.Server) *memProc {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &memProc{id: "mem", stdin: inW, stdout: outR, done: make(chan struct{})}
	go func() { // owned by p: ends when its stdin closes
		defer close(p.done)
		_ = srv.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
	}()
	return p
}

type memSession struct {
	id, root string
	mu       sync.Mutex
	notes    []string
}

func (s *memSession) ID() string              { return s.id }
func (s *memSession) Root() string            { return s.root }
func (s *memSession) Env() map[string]string  { return nil }
func (s *memSession) MCP() *mcp.ServerSession { return nil }
func (s *memSession) Notify(method string, _ any) {
	s.mu.Lock()
	s.notes = append(s.notes, method)
	s.mu.Unlock()
}

func newMemManager(t *testing.T, cfg string, servers map[string]*mcp.Server) *Manager {
	t.Helper()
	p := filepath.Join(t.TempDir(), "upstreams.json")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := New(Config{Path: p, Reserved: func(n string) bool { return n == "flyd_own" },
		Start: func(_ context.Context, srv mcpconfig.Server, _ string, _ map[string]string) (Process, error) {
			return serveMem(t, servers[srv.Name]), nil
		}})
	t.Cleanup(m.Close)
	return m
}

func TestToolsNamesAndCollisions(t *testing.T) {
	a := mcp.NewServer(&mcp.Implementation{Name: "a"}, nil)
	for _, n := range []string{"x", "own", "b.x"} {
		a.AddTool(&mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "from a"}}}, nil
		})
	}
	b := mcp.NewServer(&mcp.Implementation{Name: "b"}, nil)
	b.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "from a_b"}}}, nil
	})
	// "flyd" would shadow flyd's own flyd_own; a_b's x and a's b.x are both a_b_x.
	m := newMemManager(t, `{"mcpServers":{"flyd":{"command":"a"},"a":{"command":"a"},"a_b":{"command":"b"}}}`,
		map[string]*mcp.Server{"flyd": a, "a": a, "a_b": b})
	s := &memSession{id: "s1", root: "/w"}
	m.Join(s)
	var names []string
	for _, tl := range m.Tools(context.Background(), s) {
		names = append(names, tl.Name)
	}
	want := "flyd_b_x flyd_x a_b_x a_own a_x" // each upstream lists in name order
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("Tools = %s, want %s (flyd_own and the second a_b_x left out)", got, want)
	}
	res, ok, err := m.CallTool(context.Background(), s, &mcp.CallToolParamsRaw{Name: "a_b_x"})
	if !ok || err != nil || res.Content[0].(*mcp.TextContent).Text != "from a" {
		t.Fatalf("a_b_x went to %v (%v, %v); want the first in config order", res, ok, err)
	}
	if _, ok, _ := m.CallTool(context.Background(), s, &mcp.CallToolParamsRaw{Name: "a_nope"}); ok {
		t.Fatal("an unknown tool was handled")
	}
}

func TestListResourcesPages(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "r"}, &mcp.ServerOptions{PageSize: 2})
	for i := range 5 {
		uri := fmt.Sprintf("r://%d", i)
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: r.Params.URI}}}, nil
		})
	}
	empty := mcp.NewServer(&mcp.Implementation{Name: "e"}, nil)
	empty.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	m := newMemManager(t, `{"mcpServers":{"e":{"command":"e"},"r":{"command":"r"},"r2":{"command":"r"}}}`,
		map[string]*mcp.Server{"e": empty, "r": srv, "r2": srv})
	s := &memSession{id: "s1", root: "/w"}
	ctx := context.Background()
	var uris []string
	cursor, pages := m.FirstCursor(), 0
	for cursor != "" {
		rs, next, err := m.ListResources(ctx, s, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			uris = append(uris, r.URI)
		}
		cursor, pages = next, pages+1
		if pages > 20 {
			t.Fatal("paging does not end")
		}
	}
	if got := strings.Join(uris, " "); got != "r://0 r://1 r://2 r://3 r://4 r://0 r://1 r://2 r://3 r://4" {
		t.Fatalf("listed %s", got)
	}
	// Both list r://3: the first in config order reads it.
	res, ok, err := m.ReadResource(ctx, s, &mcp.ReadResourceParams{URI: "r://3"})
	if !ok || err != nil || res.Contents[0].Text != "r://3" {
		t.Fatalf("read = %v, %v, %v", res, ok, err)
	}
	if _, _, err := m.ListResources(ctx, s, "bogus"); err == nil {
		t.Fatal("a bogus cursor was taken")
	}
}
