package daemon

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	if helper := os.Getenv("FLY_TEST_HELPER"); helper != "" {
		os.Exit(runHelper(helper))
	}
	// The end-to-end tests that run in parallel mostly wait on flyd, its
	// children and their clients, so more of them than cores keep the
	// cores busy. A -parallel given on the command line wins.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
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
