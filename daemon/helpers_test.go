package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The real flyd and flyctl, built once per test binary.
var bins struct {
	once          sync.Once
	dir           string
	flyd, flyctl  string
	err           error
	buildOutput   []byte
	removeOnClose bool
}

func TestMain(m *testing.M) {
	if helper := os.Getenv("FLY_TEST_HELPER"); helper != "" {
		os.Exit(runHelper(helper))
	}
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binaries builds cmd/flyd and cmd/flyctl (race-checked when the tests
// are) and returns their paths.
func binaries(t testing.TB) (flyd, flyctl string) {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "flybin")
		if bins.err != nil {
			return
		}
		args := []string{"build", "-o", bins.dir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/fly-dev/fly/cmd/flyd", "github.com/fly-dev/fly/cmd/flyctl")
		bins.buildOutput, bins.err = exec.Command("go", args...).CombinedOutput()
		bins.flyd = filepath.Join(bins.dir, "flyd")
		bins.flyctl = filepath.Join(bins.dir, "flyctl")
	})
	if bins.err != nil {
		t.Fatalf("build binaries: %v\n%s", bins.err, bins.buildOutput)
	}
	return bins.flyd, bins.flyctl
}

// env is one isolated fly installation: its own socket and state dir.
type env struct {
	paths flypaths.Paths
	vars  []string // FLY_SOCKET=..., FLY_STATE_DIR=... over os.Environ
}

// newEnv returns an isolated environment in a short temp dir (socket
// paths must stay under 104 bytes, which t.TempDir can exceed).
func newEnv(t testing.TB) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := flypaths.Paths{Socket: filepath.Join(dir, "run", "flyd.sock"), StateDir: filepath.Join(dir, "state")}
	return &env{paths: p, vars: append(os.Environ(), flypaths.EnvSocket+"="+p.Socket, flypaths.EnvStateDir+"="+p.StateDir)}
}

// syncBuffer is a bytes.Buffer safe for a process to write while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// flydProc is a running flyd binary.
type flydProc struct {
	socket string
	killed bool // by kill: it could not clean up
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

// startFlyd runs "flyd run" in e and waits until it answers. Cleanup
// stops it with SIGTERM, as a service manager would, and checks it exits.
func startFlyd(t testing.TB, e *env, args ...string) *flydProc {
	t.Helper()
	flyd, _ := binaries(t)
	p := &flydProc{socket: e.paths.Socket, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(flyd, append([]string{"run", "--log-level", "debug"}, args...)...)
	p.cmd.Env = e.vars
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }() // owned by p: drained by stop
	t.Cleanup(func() { p.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := getStatus(e); err == nil {
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("flyd exited early: %v\n%s", err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("flyd did not answer within 30s\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit that removed the socket.
func (p *flydProc) stop(t testing.TB) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil && !strings.Contains(err.Error(), "killed") {
			t.Errorf("flyd exit after SIGTERM: %v\n%s", err, p.stderr)
		}
		if _, serr := os.Lstat(p.socket); err == nil && serr == nil && !p.killed {
			t.Errorf("flyd left its socket %s behind after SIGTERM", p.socket)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("flyd did not stop within 20s of SIGTERM\n%s", p.stderr)
	}
}

// kill kills flyd with SIGKILL, as a crash would, and waits for it.
func (p *flydProc) kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.done <- <-p.done
	p.killed = true
}

// httpClient talks HTTP to flyd over e's socket.
func (e *env) httpClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.paths.Socket)
		},
	}}
}

func getStatus(e *env) (*Status, error) {
	resp, err := e.httpClient().Get("http://flyd" + wire.RouteStatus)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st Status
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

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
func viaShim(e *env) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		_, flyctl := binaries(t)
		cmd := exec.Command(flyctl, "mcp", "--workspace", workspace)
		cmd.Env = e.vars
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
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

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
