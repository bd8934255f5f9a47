package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// socketWS is an MCP client transport over a WebSocket on flyd's Unix
// socket, with the environment the shim would send.
type socketWS struct {
	sock, root string
	env        []string // KEY=value
}

func (w socketWS) Connect(ctx context.Context) (mcp.Connection, error) {
	c, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient:   unixHTTPClient(w.sock),
		HTTPHeader:   http.Header{wire.HeaderWorkspace: {url.QueryEscape(w.root)}, wire.HeaderEnv: {wire.EncodeEnv(w.env)}},
		Subprotocols: []string{wire.Subprotocol},
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return mcpconn.NewWebSocket(c, "socket", 5*time.Second), nil
}

// headerSessionID is the header of Streamable HTTP that names a session.
const headerSessionID = "Mcp-Session-Id"

func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// httpFixture is flyd run in this process, a workspace with a
// pubspec.yaml, an HTTP client on flyd's socket and the workspace's /mcp
// URL.
type httpFixture struct {
	s          *daemon.Server
	sock, root string
	hc         *http.Client
	u          string
}

func newHTTPFixture(t *testing.T, cfg daemon.Config) *httpFixture {
	t.Helper()
	f := &httpFixture{root: t.TempDir()}
	writeTree(t, f.root, map[string]string{"pubspec.yaml": "name: a\n"})
	f.s, f.sock, _ = runInProcess(t, cfg)
	f.hc = unixHTTPClient(f.sock)
	t.Cleanup(f.hc.CloseIdleConnections)
	f.u = "http://flyd" + wire.RouteStreamable + "?workspace=" + url.QueryEscape(f.root)
	return f
}

// mcpPost sends one JSON-RPC message (or batch) to /mcp on session id
// ("" for none), with the version header unless version is "", and
// returns the status, the session id flyd gave and the body.
func mcpPost(t *testing.T, hc *http.Client, u, id, version, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set(headerSessionID, id)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(headerSessionID), string(b)
}

// streamablePost sends one JSON-RPC message to /mcp as a 2025-06-18
// client would, and returns the session id and the body.
func streamablePost(t *testing.T, hc *http.Client, u, session, body string) (string, string) {
	t.Helper()
	version := ""
	if session != "" {
		version = "2025-06-18"
	}
	code, id, b := mcpPost(t, hc, u, session, version, body)
	if code/100 != 2 {
		t.Fatalf("POST %.200s: %d %s", body, code, b)
	}
	return id, b
}

// TestStuckStreamStallsNobody: a Streamable HTTP client subscribes to
// 1,500 files, opens its GET stream with a tiny receive buffer and never
// reads it, and the files change. Another session on that workspace still
// hears list_changed and finds new files, a flutter_run on another
// workspace starts and stops, the stuck session is closed, and every
// goroutine it cost is returned.
func TestStuckStreamStallsNobody(t *testing.T) {
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rootA, rootB := t.TempDir(), t.TempDir()
	files := map[string]string{"pubspec.yaml": "name: a\n"}
	for i := range 1500 {
		files[fmt.Sprintf("lib/f%04d.dart", i)] = "// 0\n"
	}
	writeTree(t, rootA, files)
	writeTree(t, rootB, map[string]string{"pubspec.yaml": "name: b\n", "lib/main.dart": "void main() {}\n"})
	s, sock, stop := runInProcess(t, daemon.Config{WriteTimeout: 2 * time.Second, Flutter: flutter})
	hc := unixHTTPClient(sock)
	defer hc.CloseIdleConnections()

	// The other two clients first: what they keep is in the baseline.
	n := newNotes()
	other := connectClient(t, "other", socketWS{sock: sock, root: rootA}, n)
	runner := connectClient(t, "runner", socketWS{sock: sock, root: rootB, env: []string{"FLY_TEST_HELPER=flutter", "PATH=" + os.Getenv("PATH")}}, nil)
	waitSessions(t, s, 2)
	before := runtime.NumGoroutine()

	// The stuck client: subscribed to every file, its GET stream never read.
	u := "http://flyd" + wire.RouteStreamable + "?workspace=" + url.QueryEscape(rootA)
	id, _ := streamablePost(t, hc, u, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stuck","version":"1"}}}`)
	streamablePost(t, hc, u, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range 1500 {
		streamablePost(t, hc, u, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"workspace:///lib/f%04d.dart"}}`, i+1, i))
	}
	raw, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.(*net.UnixConn).SetReadBuffer(2048)
	fmt.Fprintf(raw, "GET %s HTTP/1.1\r\nHost: flyd\r\nAccept: text/event-stream\r\n%s: %s\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n",
		wire.RouteStreamable+"?workspace="+url.QueryEscape(rootA), headerSessionID, id)
	if line, err := bufio.NewReader(raw).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("GET stream: %q %v", line, err)
	}

	// Change every subscribed file until flyd has given up on the client:
	// its stream stops taking bytes long before.
	changed := make(chan struct{})
	go func() { // owned by the test: ends when the stuck session is gone
		defer close(changed)
		for round := 1; len(sessionsVia(s, "http")) > 0; round++ {
			for i := range 1500 {
				os.WriteFile(filepath.Join(rootA, fmt.Sprintf("lib/f%04d.dart", i)), fmt.Appendf(nil, "// %d\n", round), 0o644)
			}
			time.Sleep(50 * time.Millisecond) // the pace of the edits, as a developer's tool would make them
		}
	}()

	// Meanwhile the others carry on.
	start := time.Now()
	writeTree(t, rootA, map[string]string{"lib/new_screen.dart": "// new\n"})
	n.waitListChanged(t)
	t.Logf("the other session's list_changed came %v after the new file", time.Since(start))
	flytest.Eventually(t, "files_find sees the new file", func() bool {
		res := callTool(t, other, "files_find", map[string]any{"glob": "lib/new_*.dart"}, nil)
		return strings.Contains(toolText(res), "new_screen.dart")
	})
	start = time.Now()
	var run mcpserver.RunResult
	if res := callTool(t, runner, "flutter_run", map[string]any{"device": "linux"}, &run); res.IsError {
		t.Fatalf("flutter_run on the other workspace: %s", toolText(res))
	}
	t.Logf("flutter_run on the other workspace answered in %v", time.Since(start))
	if res := callTool(t, runner, "flutter_stop", map[string]any{"run_id": run.RunID}, nil); res.IsError {
		t.Fatalf("flutter_stop: %s", toolText(res))
	}

	select { // the stuck session is closed
	case <-changed:
	case <-time.After(2 * time.Minute): // a hang detector
		t.Fatal("the stuck session was not closed within 2 minutes")
	}
	raw.Close()
	hc.CloseIdleConnections()
	waitSessions(t, s, 2)
	deadline := time.Now().Add(time.Minute) // a hang detector
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d after the stuck client was closed, %d before it\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // goroutines ending send no event: the interval of looking
	}
	t.Logf("shutdown took %v", stop())
}

// TestDeleteClosesStreams: DELETE of a session whose GET stream is open
// ends that stream at once.
func TestDeleteClosesStreams(t *testing.T) {
	f := newHTTPFixture(t, daemon.Config{})
	s, hc, u := f.s, f.hc, f.u
	id, _ := streamablePost(t, hc, u, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	streamablePost(t, hc, u, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() { // owned by the test: ends with the stream
		defer close(ended)
		io.Copy(io.Discard, resp.Body)
	}()
	del, _ := http.NewRequest(http.MethodDelete, u, nil)
	del.Header.Set(headerSessionID, id)
	dr, err := hc.Do(del)
	if err != nil || dr.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", dr, err)
	}
	dr.Body.Close()
	select {
	case <-ended:
	case <-time.After(30 * time.Second): // a hang detector
		t.Fatal("the GET stream is still open 30s after DELETE")
	}
	waitSessions(t, s, 0)
}

// TestBatchesWhereNegotiated: a session that negotiated 2025-06-18 gets
// no batch, whatever the request's headers say; one that negotiated
// 2025-03-26 gets small batches only.
func TestBatchesWhereNegotiated(t *testing.T) {
	f := newHTTPFixture(t, daemon.Config{})
	hc, u := f.hc, f.u
	batch := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	for _, tc := range []struct {
		version string
		n, want int
	}{
		{"2025-06-18", 5000, http.StatusBadRequest},
		{"2025-06-18", 2, http.StatusBadRequest},
		{"2025-03-26", 2, http.StatusOK},
		{"2025-03-26", 5000, http.StatusRequestEntityTooLarge},
	} {
		id, _ := streamablePost(t, hc, u, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+tc.version+`","capabilities":{},"clientInfo":{"name":"batcher","version":"1"}}}`)
		mcpPost(t, hc, u, id, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if got, _, _ := mcpPost(t, hc, u, id, "", batch(tc.n)); got != tc.want { // no version header, as an attacker would
			t.Errorf("a batch of %d on a %s session = %d, want %d", tc.n, tc.version, got, tc.want)
		}
	}
}

// TestHugeInitializeNotKept: ten sessions, over Streamable HTTP and
// over a WebSocket, whose initialize carries a client name of megabytes
// and as much in a field nobody reads, keep no more than a few MB between them
// while they are live: what the client sent is bounded where it enters,
// before the SDK keeps the request.
func TestHugeInitializeNotKept(t *testing.T) {
	f := newHTTPFixture(t, daemon.Config{})
	s, hc, u := f.s, f.hc, f.u
	huge := strings.Repeat("n", 1_900_000)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	for range 5 {
		streamablePost(t, hc, u, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+huge+`","version":"1"},"unread":"`+huge+`"}}`)
	}
	for range 5 {
		c := rawClientInit(t, f.sock, f.root, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+huge+`","version":"1"},"unread":"`+huge+`"}}`)
		defer c.CloseNow()
	}
	waitSessions(t, s, 10)
	grew := int64(heap()) - int64(before)
	t.Logf("the heap grew by %d KB with 10 live sessions whose initialize held 3.8 MB each", grew>>10)
	if grew > 8<<20 {
		t.Fatalf("the heap grew by %d MB: flyd keeps what clients sent in initialize", grew>>20)
	}
	for _, sess := range s.Status().Sessions {
		if name := sess.ClientName; len(name) > mcpconn.MaxClientName {
			t.Fatalf("a client name of %d bytes is kept", len(name))
		}
	}
}
