package localapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// This file holds the API the tests serve: a runs engine, a store and the fake flutter.

// apiServer is the API over a runs engine with a store and the fake
// flutter, served over HTTP as the daemon serves it.
type apiServer struct {
	api  *API
	runs *runs.Engine
	db   *store.DB
	url  string
	c    *http.Client
	root string // a Flutter project, symlinks resolved (a workspace key)
}

// serverConfig is what a test changes of the engine and the API.
type serverConfig struct {
	RingEntries  int
	WriteTimeout time.Duration
	Heartbeat    time.Duration
}

// newAPIServer starts the API for cfg (its Flutter is the fake) with a
// store opened with opts. With unix set it listens on flyd's kind of
// local endpoint (a Unix socket, a named pipe on Windows), whose small
// buffers make a stalled reader stall quickly; else on loopback TCP.
// Cleanup stops every run, then the server.
func newAPIServer(t testing.TB, cfg serverConfig, opts store.Options, unix bool) *apiServer {
	t.Helper()
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	a := &apiServer{}
	a.runs = runs.New(runs.Config{Flutter: flutter, StopGrace: 5 * time.Second, RingEntries: cfg.RingEntries, RingBytes: 100 << 10}, log,
		func(r *runs.Run) { a.api.RunChanged(r) })
	a.api = New(Config{Runs: a.runs, Status: func() wire.Status { return wire.Status{} }, WriteTimeout: cfg.WriteTimeout, Heartbeat: cfg.Heartbeat, Log: log})
	db, err := store.Open(filepath.Join(t.TempDir(), "fly.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	a.db = db
	if err := a.runs.Open(db, ""); err != nil {
		t.Fatal(err)
	}
	ctx, stopWriter := context.WithCancel(context.Background())
	written := make(chan struct{})
	go func() { // owned by the cleanup below
		defer close(written)
		_ = db.Run(ctx)
	}()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	flytest.WriteTree(t, root, map[string]string{
		"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	})
	a.root = root
	mux := http.NewServeMux()
	a.api.Register(mux)
	hs := httptest.NewUnstartedServer(Headers(mux))
	if unix {
		dir, err := os.MkdirTemp("", "flyapi") // short: socket paths are capped
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		p, err := paths.Resolve(func(k string) string { // on Windows the socket path names a pipe
			return map[string]string{paths.EnvSocket: filepath.Join(dir, "s.sock"), paths.EnvStateDir: dir}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := ipc.Listen(p.Socket)
		if err != nil {
			t.Fatal(err)
		}
		hs.Listener.Close()
		hs.Listener = ln
		hs.Start()
		a.url = "http://flyd"
		a.c = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ipc.Dial(ctx, p.Socket)
		}}}
	} else {
		hs.Start()
		a.url, a.c = hs.URL, hs.Client()
	}
	t.Cleanup(func() {
		a.runs.Close() // ends every follow with its exit line
		hs.CloseClientConnections()
		hs.Close()
		a.api.Close()
		stopWriter()
		<-written
		db.Close()
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
	r, err := a.runs.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: a.root, Env: env, Args: []string{"run", "--machine"}})
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
		t.Fatalf("run %s: state %s, want running\n%s", r.ID(), st, tail(r, 30))
	}
	return r
}

// do sends a request and returns the response, whose body the caller closes.
func (a *apiServer) do(t testing.TB, method, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// getJSON does method path, checks the status and decodes the reply.
func (a *apiServer) getJSON(t testing.TB, method, path string, wantCode int, out any) {
	t.Helper()
	resp := a.do(t, method, path)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("%s %s = %s %s, want %d", method, path, resp.Status, body, wantCode)
	}
	if resp.Header.Get(wire.HeaderVersion) == "" {
		t.Errorf("%s %s: no %s header", method, path, wire.HeaderVersion)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: decode %s: %v", method, path, body, err)
	}
}

// tail is the last n entries of r's log, for failure messages.
func tail(r *runs.Run, n int) string {
	var b strings.Builder
	for _, e := range r.Ring().Tail(n) {
		b.WriteString(e.Text + "\n")
	}
	return b.String()
}
