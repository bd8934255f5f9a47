package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// runInProcess runs a whole flyd (Server.Run) in this process on a socket
// in a temp dir, so that its goroutines can be counted. stop cancels it
// and returns how long Run took to return.
func runInProcess(t testing.TB, cfg daemon.Config) (s *daemon.Server, sock string, stop func() time.Duration) {
	t.Helper()
	dir, err := os.MkdirTemp("", "flyin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg.Paths = flypaths.Paths{Socket: filepath.Join(dir, "run", "flyd.sock"), StateDir: filepath.Join(dir, "state")}
	s = daemon.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // owned by stop, which the cleanup calls too
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", cfg.Paths.Socket)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("flyd exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("flyd did not listen within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopped := false
	var took time.Duration
	stop = func() time.Duration {
		if stopped {
			return took
		}
		stopped = true
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(2 * time.Minute): // a hang detector, not a speed check
			t.Fatal("flyd did not stop within 2 minutes")
		}
		took = time.Since(start)
		return took
	}
	t.Cleanup(func() { stop() })
	return s, cfg.Paths.Socket, stop
}

// rawClient opens a WebSocket MCP session on sock and initializes it.
func rawClient(t *testing.T, sock, workspace string) *websocket.Conn {
	t.Helper()
	return rawClientInit(t, sock, workspace, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stuck","version":"1"}}}`)
}

// rawClientInit is rawClient with the given initialize request.
func rawClientInit(t *testing.T, sock, workspace, initialize string) *websocket.Conn {
	t.Helper()
	// A hang detector, not a speed check: a loaded machine under -race
	// takes seconds over a multi-megabyte initialize.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	c, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient:   hc,
		HTTPHeader:   http.Header{wire.HeaderWorkspace: {url.QueryEscape(workspace)}},
		Subprotocols: []string{wire.Subprotocol},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	send := func(s string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(initialize)
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// TestStuckClientIsGone: a client that sends 3,000 requests and reads
// nothing is cut, and is then gone entirely: its session unregistered and
// every goroutine it cost returned. flyd then stops promptly.
func TestStuckClientIsGone(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/big.dart": strings.Repeat("// padding line\n", 1000)})
	// The write deadline is long enough for flyd to read every request
	// first, so that thousands of handlers wait on the full outbox when
	// the cut comes, as with the default of 5s.
	s, sock, stop := runInProcess(t, daemon.Config{WriteTimeout: 2 * time.Second})

	// A well-behaved client first, so that what stays (the warm
	// workspace, HTTP's idle goroutines) is in the baseline.
	warm := rawClient(t, sock, root)
	warm.Close(websocket.StatusNormalClosure, "")
	waitSessions(t, s, 0)
	before := runtime.NumGoroutine()

	c := rawClient(t, sock, root)
	defer c.CloseNow()
	sent := make(chan struct{})
	go func() { // owned by the test: its writes fail once flyd cuts the client
		defer close(sent)
		for i := range 3000 {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"workspace:///lib/big.dart"}}`, i+1)
			if c.Write(context.Background(), websocket.MessageText, []byte(msg)) != nil {
				return
			}
		}
	}()
	waitSessions(t, s, 1)
	peak := 0
	for sessions := 1; sessions > 0; { // until it is cut and unregistered
		peak = max(peak, runtime.NumGoroutine())
		sessions = len(s.Status().Sessions)
		time.Sleep(5 * time.Millisecond)
	}
	<-sent
	c.CloseNow()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before+1 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d after the stuck client was cut, %d before it\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("goroutines: %d before, up to %d while stuck, %d after", before, peak, runtime.NumGoroutine())
	t.Logf("shutdown took %v", stop())
}

// TestShutdownWithStuckClient stops flyd while a client that reads
// nothing is still connected (not yet cut): the stop does not wait for it.
func TestShutdownWithStuckClient(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/big.dart": strings.Repeat("// padding line\n", 1000)})
	s, sock, stop := runInProcess(t, daemon.Config{WriteTimeout: time.Hour}) // never cut by a deadline
	c := rawClient(t, sock, root)
	defer c.CloseNow()
	go func() { // owned by the test: ends when flyd drops the connection
		for i := range 3000 {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"workspace:///lib/big.dart"}}`, i+1)
			if c.Write(context.Background(), websocket.MessageText, []byte(msg)) != nil {
				return
			}
		}
	}()
	waitSessions(t, s, 1)
	took := stop()
	t.Logf("shutdown with a stuck client took %v", took)
	if took > sessionCloseBudget+30*time.Second {
		t.Errorf("shutdown took %v with a stuck client", took)
	}
}

// sessionCloseBudget is how long flyd's stop lets sessions close cleanly
// before it drops their connections (daemon's own constant).
const sessionCloseBudget = 3 * time.Second

// sessionsVia returns the sessions s has now that came over via ("http",
// "socket"), as its status lists them.
func sessionsVia(s *daemon.Server, via string) []wire.Session {
	var out []wire.Session
	for _, sess := range s.Status().Sessions {
		if sess.Via == via {
			out = append(out, sess)
		}
	}
	return out
}

func waitSessions(t *testing.T, s *daemon.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := len(s.Status().Sessions)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions after 60s, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
