package daemon

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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
	tcp := &http.Client{Transport: bearer{f.token, http.DefaultTransport}}
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
	cs := connectClient(t, "attacker", connTransport{newWSConn(c, "tcp", 5*time.Second)}, nil)
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
