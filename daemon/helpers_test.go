package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	if helper := os.Getenv("FLY_TEST_HELPER"); helper != "" {
		os.Exit(runHelper(helper))
	}
	before := goleak.IgnoreCurrent()
	code := m.Run()
	flytest.Cleanup()
	// Every goroutine of every Server, session, run and index the tests
	// started is gone once they have stopped.
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func getStatus(e *flytest.Env) (*Status, error) { return flytest.Status(e) }

// notes collects what the server sent a client.
type notes struct {
	updated     chan string
	listChanged chan struct{}
}

func newNotes() *notes {
	return &notes{updated: make(chan string, 1000), listChanged: make(chan struct{}, 1000)}
}

func (n *notes) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.updated <- r.Params.URI
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			n.listChanged <- struct{}{}
		},
	}
}

// waitUpdated waits for an updated notification of uri, returning the
// other URIs seen before it.
func (n *notes) waitUpdated(t testing.TB, uri string) []string {
	t.Helper()
	var others []string
	timeout := time.After(15 * time.Second)
	for {
		select {
		case u := <-n.updated:
			if u == uri {
				return others
			}
			others = append(others, u)
		case <-timeout:
			t.Fatalf("no notifications/resources/updated for %s within 15s (saw %v)", uri, others)
		}
	}
}

func (n *notes) waitListChanged(t testing.TB) {
	t.Helper()
	select {
	case <-n.listChanged:
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/resources/list_changed within 15s")
	}
}

// connector opens an MCP client session on a workspace.
type connector func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession

// viaShim connects a go-sdk client through a real "flyctl mcp" process.
func viaShim(e *flytest.Env) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		_, flyctl := flytest.Binaries(t)
		cmd := exec.Command(flyctl, "mcp", "--workspace", workspace)
		cmd.Env = e.Vars
		cmd.Stderr = os.Stderr
		return connectClient(t, name, &mcp.CommandTransport{Command: cmd}, n)
	}
}

// inProcess connects a go-sdk client to s over in-memory transports.
func inProcess(s *Server) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		ws, err := s.ws.acquire(workspace)
		if err != nil {
			t.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		done := make(chan struct{})
		go func() { // owned by the test: waited for in Cleanup
			defer close(done)
			_ = s.serveSession(context.Background(), st, &session{id: newID(), ws: ws, via: "memory"})
		}()
		t.Cleanup(func() { <-done }) // runs after connectClient's Close: cleanups are LIFO
		return connectClient(t, name, ct, n)
	}
}

func connectClient(t testing.TB, name string, tr mcp.Transport, n *notes) *mcp.ClientSession {
	t.Helper()
	if n == nil {
		n = newNotes()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, n.options())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// newTestServer is an in-process Server whose workspaces close at the end
// of the test.
func newTestServer(t testing.TB) *Server {
	s := New(Config{})
	t.Cleanup(func() { s.ws.close() })
	return s
}

// writeTree creates files (path → content) under root.
func writeTree(t testing.TB, root string, files map[string]string) { flytest.WriteTree(t, root, files) }

// listAll pages through resources/list and returns every URI in order.
func listAll(t testing.TB, cs *mcp.ClientSession) (uris []string, pages int) {
	t.Helper()
	ctx := context.Background()
	params := &mcp.ListResourcesParams{}
	for {
		res, err := cs.ListResources(ctx, params)
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		pages++
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if res.NextCursor == "" {
			return uris, pages
		}
		params = &mcp.ListResourcesParams{Cursor: res.NextCursor}
	}
}

func readText(t testing.TB, cs *mcp.ClientSession, uri string) (string, map[string]any) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return res.Contents[0].Text, res.Meta
}

// apiServer is an in-process flyd with a store and the fake flutter,
// serving its Handler over HTTP.
type apiServer struct {
	s    *Server
	db   *store.DB
	url  string
	c    *http.Client
	root string // a Flutter project, symlinks resolved (a workspace key)
}

// newAPIServer starts a Server for cfg (its Flutter is the fake) with a
// store opened with opts. With unix set it listens on a Unix socket, as
// flyd does, whose small buffers make a stalled reader stall quickly;
// else on loopback TCP. Cleanup stops every run, then the server.
func newAPIServer(t testing.TB, cfg Config, opts store.Options, unix bool) *apiServer {
	t.Helper()
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Flutter = flutter
	s := New(cfg)
	db, err := store.Open(filepath.Join(t.TempDir(), "fly.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	stopStore, err := s.startStore(db, "")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, root, map[string]string{
		"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	})
	a := &apiServer{s: s, db: db, root: root}

	hs := httptest.NewUnstartedServer(s.Handler())
	if unix {
		dir, err := os.MkdirTemp("", "flyapi") // short: socket paths are capped
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		hs.Listener.Close()
		hs.Listener = ln
		hs.Start()
		a.url = "http://flyd"
		a.c = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	} else {
		hs.Start()
		a.url, a.c = hs.URL, hs.Client()
	}
	t.Cleanup(func() {
		s.runs.Close() // ends every follow with its exit line
		hs.CloseClientConnections()
		hs.Close()
		s.surface.Close()
		stopStore()
		s.ws.close()
	})
	return a
}

// start runs `flutter run --machine` in the project, steered by vars
// ("FAKE_FLUTTER_X=v"), and waits until the app has started unless the
// fake delays its start.
func (a *apiServer) start(t testing.TB, vars ...string) *runs.Run {
	t.Helper()
	env := map[string]string{"FLY_TEST_HELPER": "flutter"}
	for _, v := range os.Environ() {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	r, err := a.s.runs.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: a.root, Env: env, Args: []string{"run", "--machine"}})
	if err != nil {
		t.Fatal(err)
	}
	if env[fakeflutter.EnvStartupMS] != "" {
		return r
	}
	select {
	case <-r.Started():
	case <-time.After(30 * time.Second):
		t.Fatalf("run %s did not start within 30s", r.ID())
	}
	if st := r.Record().State; st != store.StateRunning {
		t.Fatalf("run %s: state %s, want running\n%s", r.ID(), st, tailText(r.Ring(), 30))
	}
	return r
}

// waitLog waits until the run's ring holds an entry containing text.
func waitLog(t testing.TB, r *runs.Run, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range r.Ring().Tail(r.Ring().Len()) {
			if strings.Contains(e.Text, text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no %q in its log within 30s\n%s", r.ID(), text, tailText(r.Ring(), 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tailText is the last n entries of ring, for failure messages.
func tailText(ring *logring.Ring, n int) string {
	var b strings.Builder
	for _, e := range ring.Tail(n) {
		b.WriteString(e.Text + "\n")
	}
	return b.String()
}
