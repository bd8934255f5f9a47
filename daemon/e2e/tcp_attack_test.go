package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPageHeadersEverywhere: every page flyd serves, on either listener,
// and the TCP guard's own refusals, forbid framing and foreign scripts.
func TestPageHeadersEverywhere(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	f := startTCPFlyd(t)
	check := func(via, path string, resp *http.Response) {
		t.Helper()
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s GET %s (%d): Content-Security-Policy %q lacks frame-ancestors 'none'", via, path, resp.StatusCode, csp)
		}
		if xfo := resp.Header.Get("X-Frame-Options"); xfo != "DENY" {
			t.Errorf("%s GET %s (%d): X-Frame-Options %q, want DENY", via, path, resp.StatusCode, xfo)
		}
	}
	paths := []string{"/", "/?token=x", "/dashboard/", "/dashboard/index.html", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/nope.html", "/nope", wire.RouteStatus}
	tcp := &http.Client{Transport: bearer{Token: f.token, Base: http.DefaultTransport}}
	for _, p := range paths {
		resp, err := tcp.Get("http://" + f.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		check("tcp", p, resp)
		resp, err = f.e.HTTPClient().Get("http://flyd" + p)
		if err != nil {
			t.Fatal(err)
		}
		check("socket", p, resp)
	}
	for _, p := range []string{wire.RouteStatus, "/v1/events"} { // refused: no token
		resp, err := http.Get("http://" + f.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		check("tcp without a token", p, resp)
	}
}

// TestTCPSessionGetsFlydsEnvironment: over TCP, the headers that set a
// session's environment and root are not honoured. A token holder who
// sends X-Fly-Env with PATH=<its dir> does not get its own flutter run,
// and X-Fly-Workspace alone names no workspace.
func TestTCPSessionGetsFlydsEnvironment(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	f := startTCPFlyd(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	evil := t.TempDir()
	marker := filepath.Join(evil, "ran")
	if err := os.WriteFile(filepath.Join(evil, "flutter"), []byte("#!/bin/sh\ntouch "+marker+"\necho pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := wire.EncodeEnv([]string{"PATH=" + evil + ":/usr/bin:/bin"})
	dial := func(query string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hdr.Set("Authorization", "Bearer "+f.token)
		return websocket.Dial(ctx, "ws://"+f.addr+wire.RouteMCP+query, &websocket.DialOptions{Subprotocols: []string{wire.Subprotocol}, HTTPHeader: hdr})
	}
	if _, resp, err := dial("", http.Header{wire.HeaderWorkspace: {url.QueryEscape(root)}, wire.HeaderEnv: {env}}); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("X-Fly-Workspace over TCP opened a session (%v)", err)
	}
	c, _, err := dial("?workspace="+url.QueryEscape(root), http.Header{wire.HeaderEnv: {env}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	cs := connectClient(t, "attacker", connTransport{mcpconn.NewWebSocket(c, "tcp", 5*time.Second)}, nil)
	res := callTool(t, cs, "flutter_doctor", nil, nil)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("flutter_doctor over TCP ran the flutter named by X-Fly-Env (%s)", toolText(res))
	}
	if strings.Contains(toolText(res), "pwned") {
		t.Fatalf("flutter_doctor output: %s", toolText(res))
	}
}

// connTransport hands an open connection to a client.
type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// TestIdleConnectionsSpareTheSocket: with flyd's descriptor limit at
// 1,024, thousands of TCP connections that send one request each (with
// and without the token) and then idle take no descriptor the socket
// needs: flyctl status and a shim session answer as usual, and the idle
// connections are closed soon after.
func TestIdleConnectionsSpareTheSocket(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.MaxFiles = 1024
	fl := flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}
	pid := fl.Cmd.Process.Pid
	fds := func() int {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		return len(ents)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 3000 {
		c, err := net.Dial("tcp", st.HTTP)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		auth := ""
		if i%2 == 0 {
			auth = "Authorization: Bearer " + strings.TrimSpace(string(tok)) + "\r\n"
		}
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: %s\r\n%s\r\n", st.HTTP, auth)
	}
	peak := fds()
	_, flyctl := flytest.Binaries(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang detector
	defer cancel()
	cmd := exec.CommandContext(ctx, flyctl, "status")
	cmd.Env = e.Vars
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("flyctl status with 3,000 idle connections: %v\n%s\nflyd:\n%s", err, out, fl.Stderr)
	}
	t.Logf("flyctl status took %v with 3,000 idle connections; flyd held %d descriptors", time.Since(start), peak)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	cs := viaShim(e)(t, "agent", root, nil)
	if uris, _ := listAll(t, cs); !slices.Contains(uris, "workspace:///lib/main.dart") {
		t.Fatalf("a shim session's resources/list = %v", uris)
	}
	if strings.Contains(fl.Stderr.String(), "too many open files") {
		t.Fatalf("flyd ran out of descriptors:\n%s", fl.Stderr)
	}
	flytest.Eventually(t, "idle connections closed", func() bool { return fds() < 200 })
	t.Logf("after the idle timeout flyd holds %d descriptors", fds())
}

// TestHugeClientNamesBounded: sessions whose clients name themselves
// with 4 MB of text (control characters included) leave a small status,
// a small store and a small log behind.
func TestHugeClientNamesBounded(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	// A 2026-07-28 client over HTTP has no session to close: its fly
	// session ends once idle. Until then its open listen stream (and the
	// other's GET stream) keep both from being idle.
	f := startTCPFlyd(t, "--http-session-idle", "1s")
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	logBefore := len(f.flyd.Stderr.String())
	huge := "\x1b[31magent\n" + strings.Repeat("agent ", 3_900_000/6) // the message's bound is 4 MiB
	ctx := context.Background()
	var sessions []*mcp.ClientSession
	// One client of each era: the 2026-07-28 one says what it is in
	// every request.
	for i, version := range []string{legacyVersion, wire.SessionlessRevision} {
		c := mcp.NewClient(&mcp.Implementation{Name: huge, Version: huge[:50_000], Title: huge[:50_000]},
			&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://" + f.addr + wire.RouteStreamable + "?workspace=" + url.QueryEscape(root),
			// Its own X-Fly-Client: one fly session for all its requests.
			HTTPClient: &http.Client{Transport: withHeader{wire.HeaderClient, "huge-" + strconv.Itoa(i), bearer{Token: f.token, Base: http.DefaultTransport}}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		if v := cs.InitializeResult().ProtocolVersion; v != version {
			t.Fatalf("client %d asked for %s, got %s", i, version, v)
		}
		sessions = append(sessions, cs)
	}
	for _, cs := range sessions {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fly://sessions/current"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Contents[0].Text); n > 4096 {
			t.Fatalf("fly://sessions/current is %d bytes", n)
		}
	}
	resp, err := f.e.HTTPClient().Get("http://flyd" + wire.RouteStatus)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st wire.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if len(body) > 64<<10 || len(st.Sessions) != 2 {
		t.Fatalf("/v1/status is %d bytes with %d sessions", len(body), len(st.Sessions))
	}
	for _, s := range st.Sessions {
		if len(s.ClientName) > mcpconn.MaxClientName || len(s.ClientVersion) > mcpconn.MaxClientVersion || strings.ContainsAny(s.ClientName, "\x1b\n") {
			t.Fatalf("a session's client name is %d bytes (%q…)", len(s.ClientName), s.ClientName[:min(40, len(s.ClientName))])
		}
	}
	for _, cs := range sessions {
		cs.Close()
	}
	flytest.Eventually(t, "sessions ended", func() bool {
		st, err := getStatus(f.e)
		return err == nil && len(st.Sessions) == 0
	})
	st2, err := getStatus(f.e)
	if err != nil {
		t.Fatal(err)
	}
	logged := len(f.flyd.Stderr.String()) - logBefore
	t.Logf("with 2 sessions named with 4 MB each: status %d bytes; after they ended fly.db %d bytes, flyd logged %d bytes", len(body), st2.DBBytes, logged)
	if st2.DBBytes > 1<<20 || logged > 256<<10 {
		t.Fatalf("fly.db %d bytes, %d bytes logged", st2.DBBytes, logged)
	}
}
