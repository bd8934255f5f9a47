package mcpserver

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/modules"
	"github.com/fly-dev/fly/daemon/overview"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("FLY_TEST_HELPER") == "flutter" {
		os.Exit(fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	// Every session, log follower and run of a test is gone once it ended.
	goleak.VerifyTestMain(m)
}

// surface is the MCP surface over one real workspace (a warm index of a
// temporary Flutter project), a runs engine with a store and the fake
// flutter, and a table of in-memory sessions: what the daemon hands it,
// without the daemon.
type surface struct {
	srv  *Server
	runs *runs.Engine
	ws   *testWorkspace
	root string

	mu       sync.Mutex
	sessions map[string]*testSession
	n        int
}

// newSurface builds a surface over a project with files (path → content;
// a pubspec.yaml and lib/main.dart when nil). Cleanup stops every run and
// session.
func newSurface(t testing.TB, files map[string]string) *surface {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if files == nil {
		files = map[string]string{
			"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
			"lib/main.dart": "void main() {}\n",
		}
	}
	flytest.WriteTree(t, root, files)
	log := slog.New(slog.DiscardHandler)
	idx, err := index.New(root, index.DefaultRules(), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopIndex := context.WithCancel(context.Background())
	indexed := make(chan struct{})
	go func() { // owned by the cleanup: Run closes the index when stopped
		defer close(indexed)
		_ = idx.Run(ctx)
	}()
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &surface{ws: &testWorkspace{root: root, idx: idx}, root: root, sessions: map[string]*testSession{}}
	s.runs = runs.New(runs.Config{Flutter: flutter, StopGrace: 5 * time.Second, RingEntries: 1000, RingBytes: 100 << 10}, log,
		func(r *runs.Run) { s.srv.RunChanged(r) })
	db, err := store.Open(filepath.Join(t.TempDir(), "fly.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.runs.Open(db, ""); err != nil {
		t.Fatal(err)
	}
	dbCtx, stopWriter := context.WithCancel(context.Background())
	written := make(chan struct{})
	go func() { // owned by the cleanup
		defer close(written)
		_ = db.Run(dbCtx)
	}()
	s.srv = New(Config{PageSize: 100, MaxReadBytes: 1 << 20, Rules: index.DefaultRules(), MaxRuns: 2, MaxBuilds: 3,
		RunStartTimeout: 10 * time.Minute, BuildTimeout: 30 * time.Minute, Runs: s.runs, Sessions: s, Log: log})
	t.Cleanup(func() {
		s.runs.Close()
		s.srv.Close()
		stopWriter()
		<-written
		db.Close()
		stopIndex()
		<-indexed
	})
	return s
}

// connect opens an MCP client session named name on the surface, as the
// daemon connects one: the session is in the table before the SDK's.
func (s *surface) connect(t testing.TB, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return s.connectEnv(t, name, opts, nil)
}

// connectFlutter is connect for a client whose environment runs the fake
// flutter, steered by vars ("FAKE_FLUTTER_X=v"): the runs its tools
// start get them.
func (s *surface) connectFlutter(t testing.TB, name string, vars ...string) *mcp.ClientSession {
	t.Helper()
	return s.connectEnv(t, name, nil, fakeEnv(vars))
}

// fakeEnv is this process's environment with the fake flutter's
// switch and vars.
func fakeEnv(vars []string) map[string]string {
	env := map[string]string{"FLY_TEST_HELPER": "flutter"}
	for _, v := range append(os.Environ(), vars...) {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	return env
}

func (s *surface) connectEnv(t testing.TB, name string, opts *mcp.ClientOptions, env map[string]string) *mcp.ClientSession {
	t.Helper()
	s.mu.Lock()
	s.n++
	sess := &testSession{id: "s" + strconv.Itoa(s.n), ws: s.ws, subs: map[string]bool{}, env: env}
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss, err := s.srv.MCP().Connect(ctx, sessionTransport{st, sess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess.ss.Store(ss)
	// The handshake era: these tests are of what flyd serves, the same in
	// both; the daemon's end-to-end tests cover the 2026-07-28 routing.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.sessions, sess.id)
		s.mu.Unlock()
	})
	return cs
}

// start runs `flutter run --machine` in the project, steered by vars
// ("FAKE_FLUTTER_X=v"), and waits until the app has started.
func (s *surface) start(t testing.TB, vars ...string) *runs.Run {
	t.Helper()
	r, err := s.runs.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: s.root, Env: fakeEnv(vars), Args: []string{"run", "--machine"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Started():
	case <-time.After(30 * time.Second):
		t.Fatalf("run %s did not start within 30s", r.ID())
	}
	return r
}

// The surface's Sessions, over the test's table.

func (s *surface) Of(ss *mcp.ServerSession) Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[ss.ID()]; sess != nil {
		return sess
	}
	return nil
}

func (s *surface) Bind(context.Context, Session) error { return nil }

func (s *surface) All() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Session
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

func (s *surface) Recent(root string) []wire.Session {
	var out []wire.Session
	for _, sess := range s.All() {
		out = append(out, sess.Info())
	}
	return out
}

// sessionTransport gives the in-memory connection the session's id and
// outbox, as the daemon's sessions have.
type sessionTransport struct {
	mcp.Transport
	sess *testSession
}

func (t sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	q := mcpconn.NewQueued(c, t.sess.id, 5*time.Second, nil, nil)
	t.sess.conn = q
	return q, nil
}

// testSession is a Session of the test's table.
type testSession struct {
	id   string
	ws   *testWorkspace
	env  map[string]string // nil: flyd's own
	conn mcpconn.Notifier
	ss   atomic.Pointer[mcp.ServerSession]

	filter       *toolfilter.Filter
	files, tools atomic.Int64
	mu           sync.Mutex
	subs         map[string]bool
}

func (s *testSession) ID() string                { return s.id }
func (s *testSession) Handle() string            { return "h" + s.id }
func (s *testSession) Transient() bool           { return false }
func (s *testSession) Root() string              { return s.ws.root }
func (s *testSession) Env() map[string]string    { return s.env }
func (s *testSession) MCP() *mcp.ServerSession   { return s.ss.Load() }
func (s *testSession) Workspace() Workspace      { return s.ws }
func (s *testSession) Tools() *toolfilter.Filter { return s.filter }
func (s *testSession) FileRead()                 { s.files.Add(1) }
func (s *testSession) ToolCalled()               { s.tools.Add(1) }
func (s *testSession) Stash(text string) string {
	return text
}

func (s *testSession) Notify(method string, params any) {
	if ss := s.ss.Load(); ss != nil && ss.InitializeParams() != nil {
		_ = s.conn.Notify(method, params)
	}
}

func (s *testSession) Listen(_ context.Context, _ string, _ any, _ mcp.NotificationSubscriptions, ack func() error) error {
	return ack()
}

// legacyVersion is the newest protocol version of the handshake era.
const legacyVersion = "2025-11-25"

func (s *testSession) Info() wire.Session {
	w := wire.Session{ID: s.id, Workspace: s.ws.root, Via: "memory", FilesRead: s.files.Load(), ToolsCalled: s.tools.Load()}
	if ss := s.ss.Load(); ss != nil && ss.InitializeParams() != nil && ss.InitializeParams().ClientInfo != nil {
		w.ClientName = ss.InitializeParams().ClientInfo.Name
	}
	return w
}

func (s *testSession) Subscribed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[uri]
}

func (s *testSession) SetSubscribed(uri string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[uri] = on
}

// testWorkspace is a Workspace over a real index.
type testWorkspace struct {
	root string
	idx  *index.Index
}

func (w *testWorkspace) Root() string        { return w.root }
func (w *testWorkspace) Index() *index.Index { return w.idx }
func (w *testWorkspace) Modules() (*modules.Graph, error) {
	var paths []string
	for _, f := range w.idx.Files() {
		paths = append(paths, f.Path)
	}
	return modules.NewBuilder().Build(w.idx.Root(), paths)
}

func (w *testWorkspace) Overview() (*overview.Overview, error) {
	var paths []string
	for _, f := range w.idx.Files() {
		paths = append(paths, f.Path)
	}
	return overview.Build(w.idx.Root(), paths)
}
