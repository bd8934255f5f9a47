package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"go.uber.org/goleak"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
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

func getStatus(e *flytest.Env) (*wire.Status, error) { return flytest.Status(e) }

// notes collects what the server sent a client.
type notes struct {
	// version is the protocol the client asks for: legacyVersion unless
	// a test says otherwise (the go-sdk client would try 2026-07-28).
	version     string
	updated     chan string
	listChanged chan struct{}
	acks        chan mcp.NotificationSubscriptions // listen streams acknowledged (2026-07-28)
	unstamped   atomic.Int64                       // 2026-07-28 notifications without a subscription id
}

// legacyVersion is the newest protocol version of the handshake era.
const legacyVersion = "2025-11-25"

func newNotes() *notes {
	return &notes{version: legacyVersion, updated: make(chan string, 1000), listChanged: make(chan struct{}, 1000),
		acks: make(chan mcp.NotificationSubscriptions, 100)}
}

// modernNotes are the notes of a client of protocol 2026-07-28.
func modernNotes() *notes {
	n := newNotes()
	n.version = wire.SessionlessRevision
	return n
}

func (n *notes) modern() bool { return wire.IsSessionless(n.version) }

// stamped counts a notification of a 2026-07-28 session that lacks the
// id of the listen stream it belongs to.
func (n *notes) stamped(meta mcp.Meta) {
	if _, ok := meta[mcp.MetaKeySubscriptionID]; n.modern() && !ok {
		n.unstamped.Add(1)
	}
}

func (n *notes) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.stamped(r.Params.Meta)
			n.updated <- r.Params.URI
		},
		ResourceListChangedHandler: func(_ context.Context, r *mcp.ResourceListChangedRequest) {
			n.stamped(r.Params.Meta)
			n.listChanged <- struct{}{}
		},
	}
}

// watchAcks records the client's listen acknowledgements in n.acks.
func (n *notes) watchAcks(c *mcp.Client) {
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok && method == "notifications/subscriptions/acknowledged" {
				select {
				case n.acks <- p.Notifications:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
}

// waitAck waits for a listen stream's acknowledgement, returning what it
// agreed to.
func (n *notes) waitAck(t testing.TB) mcp.NotificationSubscriptions {
	t.Helper()
	select {
	case a := <-n.acks:
		return a
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/subscriptions/acknowledged within 15s")
	}
	return mcp.NotificationSubscriptions{}
}

// subscribe subscribes the client to uri: resources/subscribe, or a
// listen stream that it waits to see acknowledged.
func (n *notes) subscribe(t testing.TB, cs *mcp.ClientSession, uri string) {
	t.Helper()
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
	if n.modern() {
		if a := n.waitAck(t); !slices.Equal(a.ResourceSubscriptions, []string{uri}) {
			t.Fatalf("listen for %s acknowledged %+v", uri, a)
		}
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
func inProcess(s *daemon.Server) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		ct, st := mcp.NewInMemoryTransports()
		done := make(chan struct{})
		go func() { // owned by the test: waited for in Cleanup
			defer close(done)
			if err := s.ServeTransport(context.Background(), st, workspace); err != nil {
				t.Errorf("serve %s on %s: %v", name, workspace, err)
			}
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
	n.watchAcks(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: n.version})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; n.modern() != wire.IsSessionless(got) {
		t.Fatalf("connect %s asking for %s: got %s", name, n.version, got)
	}
	if n.modern() {
		// The client opened its stream for list changes as it connected.
		if a := n.waitAck(t); !a.ResourcesListChanged {
			t.Fatalf("%s: the connect's listen stream was acknowledged without resources list changes: %+v", name, a)
		}
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// newTestServer is an in-process Server, closed at the end of the test.
func newTestServer(t testing.TB) *daemon.Server {
	s := daemon.New(daemon.Config{})
	t.Cleanup(s.Close)
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

// eachClient runs scenario as a subtest for clients of either era
// through each way agents reach flyd: the shim's socket and Streamable
// HTTP. Each subtest starts its own flyd on e's settings (start), and
// scenario connects its clients with the connector it is given.
func eachClient(t *testing.T, start func(t *testing.T) *flytest.Env, scenario func(t *testing.T, e *flytest.Env, connect connector, era func() *notes)) {
	for _, via := range []string{"shim", "http"} {
		for name, era := range eras {
			t.Run(via+"/"+name, func(t *testing.T) {
				t.Parallel() // its own flyd
				e := start(t)
				connect := viaShim(e)
				if via == "http" {
					st, err := getStatus(e)
					if err != nil || st.HTTP == "" {
						t.Fatalf("no loopback listener: %v", err)
					}
					f := &tcpFlyd{e: e, addr: st.HTTP}
					f.token = f.readToken(t)
					connect = viaStreamable(f)
				}
				scenario(t, e, connect, era)
			})
		}
	}
}
