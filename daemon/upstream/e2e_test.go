package upstream_test

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upEnv is a flyd binary whose upstreams.json names the fake upstream
// (this test binary as FLY_TEST_HELPER=upstream), recording into dir.
type upEnv struct {
	e    *flytest.Env
	flyd *flytest.Flyd
	dir  string // the fake's records: instances/, children/, roots/, cancelled/
}

func writeUpstreams(t testing.TB, e *flytest.Env, dir string, extra map[string]any) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry := map[string]any{"command": exe, "args": []string{"-test.run=^$"},
		"env": map[string]string{"FLY_TEST_HELPER": "upstream", fakeupstream.EnvDir: dir}}
	for k, v := range extra {
		entry[k] = v
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": entry}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := e.Paths.Upstreams() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, e.Paths.Upstreams()); err != nil {
		t.Fatal(err)
	}
}

func startUpEnv(t *testing.T, extra map[string]any, flydArgs ...string) *upEnv {
	t.Helper()
	u := &upEnv{e: flytest.NewEnv(t), dir: t.TempDir()}
	writeUpstreams(t, u.e, u.dir, extra)
	u.flyd = flytest.StartFlyd(t, u.e, flydArgs...)
	return u
}

// upClient is a go-sdk client through a real shim that records what the
// upstream sent it through flyd.
type upClient struct {
	cs       *mcp.ClientSession
	updated  chan string
	progress chan *mcp.ProgressNotificationParams
	logs     chan string
	tools    chan struct{}
	read     *readOrder
}

// readOrder records, in the order the client read them, the progress
// notifications ("p") and responses ("r") that reached it: the go-sdk
// hands notifications to their handler on a goroutine of their own, so
// only its reads say which came first.
type readOrder struct {
	mcp.Transport
	mu   sync.Mutex
	seen []string
}

func (o *readOrder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := o.Transport.Connect(ctx)
	return orderConn{c, o}, err
}

// take returns what was read since the last take.
func (o *readOrder) take() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := strings.Join(o.seen, "")
	o.seen = nil
	return s
}

type orderConn struct {
	mcp.Connection
	o *readOrder
}

func (c orderConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	var mark string
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.Method == "notifications/progress" {
			mark = "p"
		}
	case *jsonrpc.Response:
		mark = "r"
	}
	if mark != "" {
		c.o.mu.Lock()
		c.o.seen = append(c.o.seen, mark)
		c.o.mu.Unlock()
	}
	return msg, err
}

func (u *upEnv) connect(t *testing.T, name, ws string, args ...string) *upClient {
	t.Helper()
	return u.connectAt(t, "2025-11-25", name, ws, args...)
}

// connectAt is connect for a client of the protocol version.
func (u *upEnv) connectAt(t *testing.T, version, name, ws string, args ...string) *upClient {
	t.Helper()
	c := &upClient{updated: make(chan string, 100), progress: make(chan *mcp.ProgressNotificationParams, 1000),
		logs: make(chan string, 100), tools: make(chan struct{}, 100)}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { c.updated <- r.Params.URI },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.progress <- r.Params
		},
		LoggingMessageHandler:  func(_ context.Context, r *mcp.LoggingMessageRequest) { c.logs <- fmt.Sprint(r.Params.Data) },
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.tools <- struct{}{} },
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "sampled by " + name}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, append([]string{"mcp", "--workspace", ws}, args...)...)
	cmd.Env = u.e.Vars
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.read = &readOrder{Transport: &mcp.CommandTransport{Command: cmd}}
	cs, err := client.Connect(ctx, c.read, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("connect %s at %s: got %s", name, version, got)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"pubspec.yaml": "name: app\n", "lib/main.dart": "void main() {}\n"})
	return ws
}

func callText(t *testing.T, c *upClient, tool string, args any) string {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s failed: %s", tool, b)
	}
	b, _ := json.Marshal(res.StructuredContent)
	return string(b)
}

// eventually waits until cond holds (see flytest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) { flytest.Eventually(t, what, cond) }

// toolsWith lists cs's tools until want are among them, and returns them
// by name. A list waits at most 2 s for an upstream that has nothing
// cached, which a loaded machine can take to start one; its tools then
// come with list_changed, and a client lists again.
func toolsWith(t *testing.T, cs *mcp.ClientSession, want ...string) map[string]*mcp.Tool {
	t.Helper()
	byName := map[string]*mcp.Tool{}
	eventually(t, fmt.Sprintf("tools/list with %v", want), func() bool {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		clear(byName)
		for _, tl := range res.Tools {
			byName[tl.Name] = tl
		}
		for _, n := range want {
			if byName[n] == nil {
				return false
			}
		}
		return true
	})
	return byName
}

func waitFor[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: nothing within 60s", what)
	}
	panic("unreachable")
}

func liveOnes(pids []int) []int {
	var out []int
	for _, p := range pids {
		if fakeupstream.Alive(p) {
			out = append(out, p)
		}
	}
	return out
}

func TestUpstreamSharedPerWorkspace(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	wsA, wsB := newWorkspace(t), newWorkspace(t)
	a1, a2, b1 := u.connect(t, "a1", wsA), u.connect(t, "a2", wsA), u.connect(t, "b1", wsB)

	toolsWith(t, a1.cs, "fake_echo", "flutter_run")
	for _, c := range []*upClient{a1, a2, b1} {
		if got := callText(t, c, "fake_echo", map[string]any{"text": "hi"}); got != `{"text":"hi"}` {
			t.Fatalf("fake_echo = %s", got)
		}
	}
	if n := len(liveOnes(fakeupstream.PIDs(u.dir, "instances"))); n != 2 {
		t.Fatalf("%d upstream processes for two workspaces, want 2", n)
	}
	if n := len(liveOnes(fakeupstream.PIDs(u.dir, "children"))); n != 2 {
		t.Fatalf("%d analysis children, want 2", n)
	}
	for ws, c := range map[string]*upClient{wsA: a2, wsB: b1} {
		root, _ := filepath.EvalSymlinks(ws)
		want := fileuri.FromPath(root)
		if got := callText(t, c, "fake_roots", nil); got != `{"items":["`+want+`"]}` {
			t.Fatalf("roots = %s, want [%s]", got, want)
		}
	}

	st, err := getStatus(u.e)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Upstreams) != 2 {
		t.Fatalf("status lists %d upstreams, want 2: %+v", len(st.Upstreams), st.Upstreams)
	}
	for _, up := range st.Upstreams {
		want := 1
		if r, _ := filepath.EvalSymlinks(wsA); up.Workspace == r {
			want = 2
		}
		if up.Name != "fake" || up.State != "running" || up.PID == 0 || up.Sessions != want || !strings.HasPrefix(up.LogURI, "logs://upstream/") {
			t.Fatalf("status upstream = %+v", up)
		}
	}

	// Prompts, templates, resources and completion pass through.
	pr, err := a1.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fake_greet", Arguments: map[string]string{"name": "ann"}})
	if err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "hello ann" {
		t.Fatalf("fake_greet = %+v, %v", pr, err)
	}
	comp, err := a1.cs.Complete(context.Background(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "fake_greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "an"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "an-done" {
		t.Fatalf("complete = %+v, %v", comp, err)
	}
	uris := listAll(t, a1.cs)
	if i := slices.Index(uris, fakeupstream.CounterURI); i < 0 || !slices.Contains(uris[:i], "workspace:///lib/main.dart") {
		t.Fatalf("resources/list = %v: want flyd's own, then %s", uris, fakeupstream.CounterURI)
	}
	if text := readText(t, a1.cs, "fake://item/7"); text != "item 7" {
		t.Fatalf("read through the template = %q", text)
	}
	tmpls, err := a1.cs.ListResourceTemplates(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(tmpls.ResourceTemplates, func(r *mcp.ResourceTemplate) bool { return r.URITemplate == "fake://item/{id}" }) {
		t.Fatalf("templates = %v, %v", tmpls, err)
	}

	// Sampling goes to the only caller; logging to each at its level.
	if got := callText(t, a2, "fake_sample", nil); got != `{"text":"sampled by a2"}` {
		t.Fatalf("fake_sample = %s", got)
	}
	if err := a1.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	callText(t, a2, "fake_log", map[string]any{"text": "careful"})
	if got := waitFor(t, "log message", a1.logs); got != "careful" {
		t.Fatalf("log = %q", got)
	}
}

func TestUpstreamSubscriptionsAreCounted(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	ws := newWorkspace(t)
	c1, c2 := u.connect(t, "c1", ws), u.connect(t, "c2", ws)
	ctx := context.Background()
	subs := func() string { return callText(t, c1, "fake_subscriptions", nil) }
	for _, c := range []*upClient{c1, c2} {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: fakeupstream.CounterURI}); err != nil {
			t.Fatal(err)
		}
	}
	if got := subs(); got != `{"items":["fake://counter"]}` {
		t.Fatalf("upstream subscriptions = %s", got)
	}
	callText(t, c1, "fake_bump", nil)
	waitFor(t, "c1 updated", c1.updated)
	waitFor(t, "c2 updated", c2.updated)

	if err := c1.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: fakeupstream.CounterURI}); err != nil {
		t.Fatal(err)
	}
	if got := subs(); got != `{"items":["fake://counter"]}` {
		t.Fatalf("after one of two left, upstream subscriptions = %s", got)
	}
	callText(t, c1, "fake_bump", nil)
	waitFor(t, "c2 updated after c1 left", c2.updated)

	// The upstream dies: c2's subscription is made again on the new one.
	pids := liveOnes(fakeupstream.PIDs(u.dir, "instances"))
	if len(pids) != 1 {
		t.Fatalf("upstreams alive: %v", pids)
	}
	if err := kill(pids[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new upstream", func() bool {
		return len(liveOnes(fakeupstream.PIDs(u.dir, "instances"))) == 1 && !fakeupstream.Alive(pids[0])
	})
	eventually(t, "the subscription re-made", func() bool {
		res, err := c1.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fake_subscriptions"})
		if err != nil || res.IsError {
			return false
		}
		b, _ := json.Marshal(res.StructuredContent)
		return string(b) == `{"items":["fake://counter"]}`
	})
	for len(c2.updated) > 0 {
		<-c2.updated
	}
	callText(t, c1, "fake_bump", nil)
	waitFor(t, "c2 updated after the restart", c2.updated)

	if err := c2.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: fakeupstream.CounterURI}); err != nil {
		t.Fatal(err)
	}
	if got := subs(); got != `{"items":[]}` {
		t.Fatalf("after both left, upstream subscriptions = %s", got)
	}
}

func TestUpstreamCrashMidCall(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	ws := newWorkspace(t)
	c := u.connect(t, "c", ws)
	callText(t, c, "fake_echo", map[string]any{"text": "warm"})
	pid := liveOnes(fakeupstream.PIDs(u.dir, "instances"))[0]
	child := liveOnes(fakeupstream.PIDs(u.dir, "children"))[0]

	errc := make(chan error, 1)
	go func() { // owned by the test: drained below
		p := &mcp.CallToolParams{Name: "fake_slow", Arguments: map[string]any{"steps": 100000}}
		p.SetProgressToken("mine")
		_, err := c.cs.CallTool(context.Background(), p)
		errc <- err
	}()
	pg := waitFor(t, "progress", c.progress)
	if pg.ProgressToken != "mine" || pg.Message != "step 1" {
		t.Fatalf("progress = %+v; want the caller's token", pg)
	}
	if err := kill(pid); err != nil {
		t.Fatal(err)
	}
	err := waitFor(t, "the call's error", errc)
	if err == nil || !strings.Contains(err.Error(), "upstream fake") || !strings.Contains(err.Error(), fmt.Sprintf("fake upstream %d started", pid)) {
		t.Fatalf("call error = %v; want one naming the upstream and quoting its stderr", err)
	}
	eventually(t, "the analysis child of the killed upstream gone", func() bool { return !fakeupstream.Alive(child) })
	eventually(t, "the next call works", func() bool {
		res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_echo", Arguments: map[string]any{"text": "again"}})
		return err == nil && !res.IsError
	})
	st, err := getStatus(u.e)
	if err != nil || len(st.Upstreams) != 1 || st.Upstreams[0].Restarts != 1 {
		t.Fatalf("status after a crash = %+v, %v", st.Upstreams, err)
	}
}

// TestUpstreamProgressBeforeResult: every progress notification the
// upstream sends before a call's result reaches the client before that
// result, as the upstream sent them, however fast they come.
func TestUpstreamProgressBeforeResult(t *testing.T) {
	t.Parallel() // its own flyd
	u := startUpEnv(t, nil)
	c := u.connect(t, "c", newWorkspace(t))
	callText(t, c, "fake_echo", map[string]any{"text": "warm"})
	const steps = 50
	for i := range 5 {
		c.read.take()
		p := &mcp.CallToolParams{Name: "fake_slow", Arguments: map[string]any{"steps": steps, "burst": true}}
		p.SetProgressToken(fmt.Sprint("burst-", i))
		if _, err := c.cs.CallTool(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		if got, want := c.read.take(), strings.Repeat("p", steps)+"r"; got != want {
			t.Fatalf("call %d: the client read %q (p: progress, r: a response); want %d progress notifications, then the result", i, got, steps)
		}
	}
}

func TestUpstreamCancelAndTimeout(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, map[string]any{"timeout_sec": 2})
	ws := newWorkspace(t)
	c1, c2 := u.connect(t, "c1", ws), u.connect(t, "c2", ws)
	// timeout_sec also bounds the upstream's start, which a loaded
	// machine can take longer than 2 s over: the calls below are timed
	// against a running upstream.
	eventually(t, "the upstream running", func() bool {
		res, err := c2.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_echo", Arguments: map[string]any{"text": "up"}})
		return err == nil && !res.IsError
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { // owned by the test: drained below
		p := &mcp.CallToolParams{Name: "fake_slow", Arguments: map[string]any{"steps": 100000}}
		p.SetProgressToken(7)
		_, err := c1.cs.CallTool(ctx, p)
		errc <- err
	}()
	waitFor(t, "progress", c1.progress)
	cancel()
	waitFor(t, "the cancelled call", errc)
	eventually(t, "the upstream told of the cancel", func() bool { return len(fakeupstream.PIDs(u.dir, "cancelled")) == 1 })

	// A call that outlives timeout_sec fails; another session is not held up.
	done := make(chan *mcp.CallToolResult, 1)
	go func() { // owned by the test: drained below
		res, err := c1.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_slow", Arguments: map[string]any{"steps": 100000}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	if got := callText(t, c2, "fake_echo", map[string]any{"text": "quick"}); got != `{"text":"quick"}` {
		t.Fatalf("echo during another session's slow call = %s", got)
	}
	res := waitFor(t, "the timed-out call", done)
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "did not answer within 2s") {
		t.Fatalf("slow call = %s; want a timeout naming timeout_sec", b)
	}
}

func TestUpstreamConfigReloadAndIdle(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	dir := t.TempDir()
	flytest.StartFlyd(t, e, "--linger", "1s")
	ws := newWorkspace(t)
	// A project's own config is never read: a cloned repo must not make
	// flyd run commands.
	exe, _ := os.Executable()
	writeTree(t, ws, map[string]string{
		"upstreams.json": `{"mcpServers":{"evil":{"command":"` + exe + `"}}}`,
		".mcp.json":      `{"mcpServers":{"evil":{"command":"` + exe + `"}}}`,
	})
	u := &upEnv{e: e, dir: dir}
	c := u.connect(t, "c", ws)
	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if strings.HasPrefix(tl.Name, "evil_") || strings.HasPrefix(tl.Name, "fake_") {
			t.Fatalf("tool %s with no user config", tl.Name)
		}
	}

	writeUpstreams(t, e, dir, nil)
	waitFor(t, "tools/list_changed after the config appeared", c.tools)
	callText(t, c, "fake_echo", map[string]any{"text": "x"})
	first := liveOnes(fakeupstream.PIDs(dir, "instances"))

	writeUpstreams(t, e, dir, map[string]any{"timeout_sec": 30})
	eventually(t, "the changed upstream stopped", func() bool { return !fakeupstream.Alive(first[0]) })
	callText(t, c, "fake_echo", map[string]any{"text": "y"})
	second := liveOnes(fakeupstream.PIDs(dir, "instances"))
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("after a change: upstreams %v (before %v)", second, first)
	}

	// Two entries that would name the same tools are refused, naming both;
	// the previous config stays.
	bad := `{"mcpServers":{"one":{"command":"x","prefix":"fake"},"fake":{"command":"y"}}}`
	if err := os.WriteFile(e.Paths.Upstreams(), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refusal in status", func() bool {
		st, err := getStatus(e)
		return err == nil && slices.ContainsFunc(st.Notices, func(n string) bool { return strings.Contains(n, "servers one and fake both name their tools fake_*") })
	})
	callText(t, c, "fake_echo", map[string]any{"text": "still"})

	// Idle: the last session leaves, the upstream stops after the linger.
	c.cs.Close()
	eventually(t, "the idle upstream stopped", func() bool { return len(liveOnes(fakeupstream.PIDs(dir, "instances"))) == 0 })
}

func TestUpstreamsDieWithFlyd(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, map[string]any{"share": "session"})
	ws := newWorkspace(t)
	c1, c2 := u.connect(t, "c1", ws), u.connect(t, "c2", ws)
	callText(t, c1, "fake_echo", map[string]any{"text": "1"})
	callText(t, c2, "fake_echo", map[string]any{"text": "2"})
	if n := len(liveOnes(fakeupstream.PIDs(u.dir, "instances"))); n != 2 {
		t.Fatalf("share session: %d upstreams for 2 sessions, want 2", n)
	}
	u.flyd.Stop(t)
	all := append(fakeupstream.PIDs(u.dir, "instances"), fakeupstream.PIDs(u.dir, "children")...)
	if left := liveOnes(all); len(left) > 0 {
		t.Fatalf("after flyd's SIGTERM, upstream processes %v are alive", left)
	}
}

func TestUpstreamListsFromCacheWhileStarting(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	ws := newWorkspace(t)
	c := u.connect(t, "c", ws)
	callText(t, c, "fake_echo", map[string]any{"text": "fills the cache"})
	c.cs.Close()
	u.flyd.Stop(t)

	// The next flyd's upstream cannot answer until the gate opens; a new
	// session's tools/list still names its tools, from the store.
	gate := filepath.Join(t.TempDir(), "gate")
	writeUpstreams(t, u.e, u.dir, map[string]any{"env": map[string]string{"FLY_TEST_HELPER": "upstream", fakeupstream.EnvDir: u.dir, fakeupstream.EnvGate: gate}})
	u.flyd = flytest.StartFlyd(t, u.e)
	c = u.connect(t, "c2", ws)
	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "fake_echo" }) {
		t.Fatal("tools/list after a restart lacks the cached fake_echo")
	}
	st, err := getStatus(u.e)
	if err != nil || len(st.Upstreams) != 1 || st.Upstreams[0].State != "starting" {
		t.Fatalf("upstream while gated = %+v, %v; want it starting", st.Upstreams, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := callText(t, c, "fake_echo", map[string]any{"text": "now"}); got != `{"text":"now"}` {
		t.Fatalf("fake_echo after the gate opened = %s", got)
	}
}

func TestUpstreamListChangedAndGlobal(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, map[string]any{"share": "global"})
	wsA, wsB := newWorkspace(t), newWorkspace(t)
	a, b := u.connect(t, "a", wsA), u.connect(t, "b", wsB)
	callText(t, a, "fake_echo", map[string]any{"text": "1"})
	callText(t, b, "fake_echo", map[string]any{"text": "2"})
	if n := len(liveOnes(fakeupstream.PIDs(u.dir, "instances"))); n != 1 {
		t.Fatalf("share global: %d upstreams for two workspaces, want 1", n)
	}
	// A global upstream's roots are every sharing workspace.
	got := callText(t, b, "fake_roots", nil)
	for _, ws := range []string{wsA, wsB} {
		root, _ := filepath.EvalSymlinks(ws)
		if !strings.Contains(got, fileuri.FromPath(root)) {
			t.Fatalf("roots = %s; want both workspaces", got)
		}
	}
	// The upstream's tools/list_changed reaches both, with the new tool.
	for len(a.tools) > 0 {
		<-a.tools
	}
	for len(b.tools) > 0 {
		<-b.tools
	}
	callText(t, a, "fake_grow", map[string]any{"text": "sprout"})
	waitFor(t, "a told the tools changed", a.tools)
	waitFor(t, "b told the tools changed", b.tools)
	// Told at once, a client that lists at once gets the new list, not
	// the one it replaced.
	res, err := b.cs.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == "fake_sprout" }) {
		t.Fatalf("tools/list right after list_changed has no fake_sprout: %v", err)
	}
	if got := callText(t, b, "fake_sprout", nil); got != `{"text":"grown sprout"}` {
		t.Fatalf("fake_sprout = %s", got)
	}
}

// TestUpstreamSilentDoesNotDelayLists: an upstream that never answers
// initialize, beside one that answers late, costs a session's tools/list
// no more than a short bound: flyd's own tools come at once, the late
// upstream's tools arrive with list_changed, and the silent one shows as
// failing in the status, with its stderr.
func TestUpstreamSilentDoesNotDelayLists(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"mcpServers": map[string]any{
		"silent": map[string]any{"command": exe, "args": []string{"-test.run=^$"}, "env": map[string]string{"FLY_TEST_HELPER": "silent"}},
		"fake": map[string]any{"command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{"FLY_TEST_HELPER": "upstream", fakeupstream.EnvDir: dir, fakeupstream.EnvGate: gate}},
	}}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.Upstreams(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	flytest.StartFlyd(t, e)
	u := &upEnv{e: e, dir: dir}
	c := u.connect(t, "c", newWorkspace(t))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
	defer cancel()
	tools, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list with a silent upstream: %v", err)
	}
	t.Logf("tools/list answered in %v with a silent upstream and a late one", time.Since(start))
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "flutter_run" }) {
		t.Fatal("tools/list lacks flyd's own tools")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "list_changed when the late upstream arrives", c.tools)
	tools, err = c.cs.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "fake_echo" }) {
		t.Fatalf("tools/list after the late upstream arrived: %v", err)
	}
	eventually(t, "the silent upstream shows as failing, with its stderr", func() bool {
		st, err := getStatus(e)
		if err != nil {
			return false
		}
		for _, up := range st.Upstreams {
			if up.Name == "silent" && up.State == "failing" && strings.Contains(up.Error, "waking up, slowly") && up.PID > 0 {
				return true
			}
		}
		return false
	})
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "status")
	cmd.Env = e.Vars
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "upstream silent is failing: no answer to initialize") || !strings.Contains(string(out), "waking up, slowly") {
		t.Fatalf("flyctl status: %v\n%s", err, out)
	}
}

// TestUpstreamInputBothEras: an upstream's sampling request in the middle
// of a call reaches a handshake-era client as a request of flyd's, and a
// 2026-07-28 client as an input_required result of its call, which its
// SDK answers by retrying the call; both get the upstream's result.
func TestUpstreamInputBothEras(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	ws := newWorkspace(t)
	legacy := u.connect(t, "legacy", ws)
	modern := u.connectAt(t, "2026-07-28", "modern", ws)
	if got := callText(t, modern, "fake_sample", nil); got != `{"text":"sampled by modern"}` {
		t.Fatalf("fake_sample for the 2026-07-28 client = %s", got)
	}
	if got := callText(t, legacy, "fake_sample", nil); got != `{"text":"sampled by legacy"}` {
		t.Fatalf("fake_sample for the handshake-era client = %s", got)
	}
	// A 2026-07-28 client that cannot sample is not asked to: its call
	// fails with -32021, naming what it lacks.
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", ws)
	cmd.Env = u.e.Vars
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bare, err := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	_, err = bare.CallTool(ctx, &mcp.CallToolParams{Name: "fake_sample"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcp.CodeMissingRequiredClientCapabilities || !strings.Contains(string(je.Data), "sampling") {
		t.Fatalf("fake_sample for a client without sampling = %v, want -32021 naming sampling", err)
	}
}
