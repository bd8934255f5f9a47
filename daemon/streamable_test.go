package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// TestIdleHTTPSessionsReaped: a session nobody uses is closed after the
// idle time, without waiting for the table to fill; a full table makes
// room by closing the longest idle one.
func TestIdleHTTPSessionsReaped(t *testing.T) {
	s, hc, u := runServer(t, Config{HTTPSessionIdle: 300 * time.Millisecond})
	id := initializeHTTP(t, hc, u)
	flytest.Eventually(t, "the idle session reaped", func() bool { return s.http.get(id) == nil })

	s2, hc2, u2 := runServer(t, Config{})
	first := initializeHTTP(t, hc2, u2)
	// Its request ends (and its idle time starts) when flyd's handler
	// returns, which may be after the client has read the answer: the
	// sessions made after it must be younger.
	flytest.Eventually(t, "the first session idle", func() bool {
		h := s2.http.get(first)
		return h != nil && h.idle() > 0
	})
	for range maxHTTPSessions - 1 {
		initializeHTTP(t, hc2, u2)
	}
	if initializeHTTP(t, hc2, u2); s2.http.get(first) != nil {
		t.Fatal("a full table did not make room by closing the longest idle session")
	}
}

// runServer runs a whole flyd (Server.Run) in this process on a socket in
// a temp dir until the test ends. It returns an HTTP client on the socket
// and the Streamable HTTP URL of a workspace holding a pubspec.yaml.
func runServer(t *testing.T, cfg Config) (s *Server, hc *http.Client, u string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "flyin") // short: a socket's path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root := t.TempDir()
	flytest.WriteTree(t, root, map[string]string{"pubspec.yaml": "name: a\n"})
	// As flyd resolves them: on Windows the socket path names a pipe.
	p, err := flypaths.Resolve(func(k string) string {
		return map[string]string{flypaths.EnvSocket: filepath.Join(dir, "run", "flyd.sock"), flypaths.EnvStateDir: filepath.Join(dir, "state")}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Paths = flypaths.Paths{Socket: p.Socket, StateDir: p.StateDir}
	s = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // owned by the cleanup below, which stops it and waits
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return ipc.Dial(ctx, cfg.Paths.Socket)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	flytest.Eventually(t, "flyd listening", func() bool {
		c, err := ipc.Dial(context.Background(), cfg.Paths.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return s, hc, "http://flyd" + wire.RouteStreamable + "?workspace=" + url.QueryEscape(root)
}

// initializeHTTP starts a Streamable HTTP session of a 2025-06-18 client
// at u and returns its id.
func initializeHTTP(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	return resp.Header.Get(headerSessionID)
}
