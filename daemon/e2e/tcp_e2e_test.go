package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tcpFlyd is a flyd binary with its loopback listener on a free port.
type tcpFlyd struct {
	e     *flytest.Env
	flyd  *flytest.Flyd
	addr  string
	token string
}

func startTCPFlyd(t *testing.T, args ...string) *tcpFlyd {
	t.Helper()
	e := flytest.NewEnv(t)
	f := flytest.StartFlyd(t, e, args...)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	tf := &tcpFlyd{e: e, flyd: f, addr: st.HTTP}
	tf.token = tf.readToken(t)
	return tf
}

func (f *tcpFlyd) readToken(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(f.e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// bearer adds the token to every request.
type bearer = flytest.Bearer

// tcpWS is an MCP client transport over the TCP listener's WebSocket.
type tcpWS struct {
	f    *tcpFlyd
	root string
}

func (w tcpWS) Connect(ctx context.Context) (mcp.Connection, error) {
	c, _, err := websocket.Dial(ctx, "ws://"+w.f.addr+wire.RouteMCP+"?workspace="+url.QueryEscape(w.root), &websocket.DialOptions{
		Subprotocols: []string{wire.Subprotocol},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + w.f.token}},
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return mcpconn.NewWebSocket(c, "tcp", 5*time.Second), nil
}

func viaTCPWebSocket(f *tcpFlyd) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		return connectClient(t, name, tcpWS{f, workspace}, n)
	}
}

// viaStreamable connects over Streamable HTTP. Each client sends an
// X-Fly-Client of its own, as the README asks of a 2026-07-28 client
// that wants one fly session across its requests.
func viaStreamable(f *tcpFlyd) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		return connectClient(t, name, &mcp.StreamableClientTransport{
			Endpoint:   "http://" + f.addr + wire.RouteStreamable + "?workspace=" + url.QueryEscape(workspace),
			HTTPClient: &http.Client{Transport: withHeader{wire.HeaderClient, rand.Text(), bearer{Token: f.token, Base: http.DefaultTransport}}},
		}, n)
	}
}

// withHeader sets one header on every request.
type withHeader struct {
	key, value string
	base       http.RoundTripper
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return h.base.RoundTrip(r)
}

func TestSharedWorkspaceOverTCP(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	for name, via := range map[string]func(*tcpFlyd) connector{"websocket": viaTCPWebSocket, "streamable": viaStreamable} {
		for ename, era := range eras {
			t.Run(name+"/"+ename, func(t *testing.T) {
				f := startTCPFlyd(t)
				sharedScenario(t, via(f), func() *wire.Status {
					st, err := getStatus(f.e)
					if err != nil {
						t.Fatal(err)
					}
					return st
				}, era)
			})
		}
	}
}

// TestRunOverStreamableHTTP starts and stops a run from an HTTP client of
// either era, and the socket's client sees it.
func TestRunOverStreamableHTTP(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	for name, era := range eras {
		t.Run(name, func(t *testing.T) { runOverStreamableHTTP(t, era()) })
	}
}

func runOverStreamableHTTP(t *testing.T, n *notes) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	fl := flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFlyd{e: e, flyd: fl, addr: st.HTTP}
	f.token = f.readToken(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	h := viaStreamable(f)(t, "http-client", root, n)
	s := viaShim(e)(t, "shim-client", root, nil)
	ctx := context.Background()
	res, err := h.CallTool(ctx, &mcp.CallToolParams{Name: "flutter_run", Arguments: map[string]any{"device": "linux"}})
	if err != nil || res.IsError {
		b, _ := json.Marshal(res)
		t.Fatalf("flutter_run over HTTP: %v %s", err, b)
	}
	var run mcpserver.RunResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &run); err != nil || run.RunID == "" {
		t.Fatalf("flutter_run result %s", b)
	}
	list, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "runs_list"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(list.StructuredContent); !strings.Contains(string(b), run.RunID) {
		t.Fatalf("the socket's client does not see the HTTP client's run: %s", b)
	}
	// The HTTP client is one fly session, named as it named itself,
	// whichever era it speaks.
	if st, err := getStatus(e); err != nil {
		t.Fatal(err)
	} else if i := slices.IndexFunc(st.Sessions, func(s wire.Session) bool { return s.ClientName == "http-client" }); i < 0 || st.Sessions[i].Via != "http" || st.Sessions[i].ToolsCalled != 1 {
		t.Fatalf("status sessions = %+v, want http-client over http with 1 tool called", st.Sessions)
	}
	if res, err := h.CallTool(ctx, &mcp.CallToolParams{Name: "flutter_stop", Arguments: map[string]any{"run_id": run.RunID}}); err != nil || res.IsError {
		t.Fatalf("flutter_stop over HTTP: %v %v", err, res)
	}
}

func TestTCPRefusals(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	f := startTCPFlyd(t)
	if fi, err := os.Stat(f.e.Paths.Token()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", fi, err)
	}
	if len(f.token) < 32 {
		t.Fatalf("token %q is short", f.token)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+f.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	auth := "Bearer " + f.token
	for _, tc := range []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		{"no token", "GET", wire.RouteStatus, nil, 401},
		{"wrong token", "GET", wire.RouteStatus, map[string]string{"Authorization": "Bearer nope"}, 401},
		{"token", "GET", wire.RouteStatus, map[string]string{"Authorization": auth}, 200},
		// A credential the browser sends by itself opens nothing.
		{"token as a cookie", "GET", wire.RouteStatus, map[string]string{"Cookie": "fly_token=" + f.token}, 401},
		{"cookie on an upgrade", "GET", wire.RouteMCP, map[string]string{"Cookie": "fly_token=" + f.token, "Upgrade": "websocket", "Connection": "Upgrade"}, 401},
		{"cookie on a stop", "POST", "/v1/runs/x/stop", map[string]string{"Cookie": "fly_token=" + f.token}, 401},
		{"cookie on streamable", "POST", wire.RouteStreamable, map[string]string{"Cookie": "fly_token=" + f.token}, 401},
		{"token in basic auth", "GET", wire.RouteStatus, map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+f.token))}, 401},
		{"the page without a token", "GET", "/", nil, 200},
		{"its script without a token", "GET", "/dashboard/app.js", nil, 200},
		{"events without a token", "GET", "/v1/events", nil, 401},
		{"foreign host", "GET", wire.RouteStatus, map[string]string{"Authorization": auth, "Host": "evil.example:7717"}, 403},
		{"foreign origin on a change", "POST", "/v1/runs/x/stop", map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, 403},
		{"foreign origin on an upgrade", "GET", wire.RouteMCP, map[string]string{"Authorization": auth, "Origin": "http://evil.example", "Upgrade": "websocket", "Connection": "Upgrade"}, 403},
		{"own origin", "POST", "/v1/runs/x/stop", map[string]string{"Authorization": auth, "Origin": "http://" + f.addr}, 404},
		{"mcp without a token", "POST", wire.RouteStreamable, nil, 401},
		{"rotate over TCP", "POST", wire.RouteTokenRotate, map[string]string{"Authorization": auth}, 403},
	} {
		if got := do(tc.method, tc.path, tc.hdr).StatusCode; got != tc.want {
			t.Errorf("%s: %s %s = %d, want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}

	// No route sets a cookie, whatever the address holds.
	for _, p := range []string{"/", "/?token=" + f.token, "/dashboard/", "/dashboard/index.html"} {
		if resp := do("GET", p, nil); resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie: %q", p, resp.Header.Get("Set-Cookie"))
		}
	}

	// Rotation through the socket: the old token stops working at once.
	c := f.e.HTTPClient()
	r, err := c.Post("http://flyd"+wire.RouteTokenRotate, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rot struct {
		Token string `json:"token"`
	}
	json.NewDecoder(r.Body).Decode(&rot)
	r.Body.Close()
	if rot.Token == "" || rot.Token == f.token || f.readToken(t) != rot.Token {
		t.Fatalf("rotate gave %q (file %q, old %q)", rot.Token, f.readToken(t), f.token)
	}
	if got := do("GET", wire.RouteStatus, map[string]string{"Authorization": auth}).StatusCode; got != 401 {
		t.Fatalf("the old token after rotation = %d, want 401", got)
	}
	if got := do("GET", wire.RouteStatus, map[string]string{"Authorization": "Bearer " + rot.Token}).StatusCode; got != 200 {
		t.Fatalf("the new token = %d, want 200", got)
	}
}

func TestTCPPortTakenAndDisabled(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	f := startTCPFlyd(t, "--listen", taken.Addr().String())
	if f.addr == "" || f.addr == taken.Addr().String() {
		t.Fatalf("with %s taken, flyd listens on %q", taken.Addr(), f.addr)
	}
	if !strings.Contains(f.flyd.Stderr.String(), "is taken") {
		t.Fatalf("flyd did not say the port was taken:\n%s", f.flyd.Stderr)
	}
	if b, _ := os.ReadFile(f.e.Paths.HTTPAddr()); strings.TrimSpace(string(b)) != f.addr {
		t.Fatalf("http.addr = %q, want %q", b, f.addr)
	}

	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e, "--listen", "")
	st, err := getStatus(e)
	if err != nil || st.HTTP != "" {
		t.Fatalf("--listen \"\": status http %q, %v", st.HTTP, err)
	}
	if _, err := os.Stat(e.Paths.HTTPAddr()); err == nil {
		t.Fatal("http.addr written with the listener off")
	}

	flyd, _ := flytest.Binaries(t)
	cmd := exec.Command(flyd, "run", "--listen", "0.0.0.0:7717")
	cmd.Env = flytest.NewEnv(t).Vars
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "loopback") {
		t.Fatalf("--listen 0.0.0.0:7717: %v\n%s", err, out)
	}
}

// TestStreamableWorkspaceFromRoots: a URL without ?workspace= takes the
// client's first root; a client without roots is told how to name one.
func TestStreamableWorkspaceFromRoots(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	f := startTCPFlyd(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	tr := func() *mcp.StreamableClientTransport {
		return &mcp.StreamableClientTransport{Endpoint: "http://" + f.addr + wire.RouteStreamable,
			HTTPClient: &http.Client{Transport: bearer{Token: f.token, Base: http.DefaultTransport}}}
	}
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "rooted", Version: "1"}, nil)
	//lint:ignore SA1019 roots are how a session-ful client names its project
	c.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: root}).String()})
	cs, err := c.Connect(ctx, tr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	uris, _ := listAll(t, cs)
	if !slices.Contains(uris, "workspace:///lib/main.dart") {
		t.Fatalf("resources/list of a session bound by its roots = %v", uris)
	}

	// A client that offers no roots: the go-sdk client offers the
	// capability, but an empty list.
	bare, err := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, nil).Connect(ctx, tr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.ListResources(ctx, nil); err == nil || !strings.Contains(err.Error(), "?workspace=") {
		t.Fatalf("a session with no workspace and no roots: %v", err)
	}
}
