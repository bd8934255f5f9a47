package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/wire"
)

// harness runs a Relay on real pipes, as flyctl mcp runs it on the
// editor's stdio.
// hangAfter is how long a test waits for something that must happen: a
// hang detector, far beyond what a loaded machine needs, never a speed
// check.
const hangAfter = 2 * time.Minute

type harness struct {
	t      *testing.T
	relay  *Relay
	stdin  *os.File // write end of the relay's stdin
	stdout *os.File // read end of the relay's stdout
	out    *bufio.Reader
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
	logs   *syncBuffer // the relay's log, when the test did not set one
}

// newHarness returns a harness whose relay is configured but not running;
// tests may adjust h.relay before calling start.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stdin, cfg.Stdout = inR, outW
	logs := &syncBuffer{}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.MultiWriter(tWriter{t}, logs), nil))
	}
	h := &harness{
		t: t, relay: New(cfg), stdin: inW, stdout: outR,
		out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1), logs: logs,
	}
	t.Cleanup(func() {
		if h.cancel != nil {
			h.cancel()
			inW.Close()
			outR.Close() // a relay blocked writing stdout gets EPIPE and ends
			h.wait()
		}
		inR.Close()
		outR.Close()
		outW.Close()
	})
	return h
}

func (h *harness) start() *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	outW := h.relay.cfg.Stdout.(*os.File)
	go func() {
		err := h.relay.Run(ctx)
		outW.Close() // the test then reads EOF after the last line
		h.done <- err
	}()
	return h
}

// startRelay starts a relay for cfg.
func startRelay(t *testing.T, cfg Config) *harness {
	t.Helper()
	return newHarness(t, cfg).start()
}

// send writes one line (a newline is added) to the relay's stdin.
func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := h.stdin.WriteString(line + "\n"); err != nil {
		h.t.Fatalf("write stdin: %v", err)
	}
}

// waitLog waits until the relay has logged a message containing msg.
func (h *harness) waitLog(msg string) {
	h.t.Helper()
	for deadline := time.Now().Add(hangAfter); !strings.Contains(h.logs.String(), msg); {
		if time.Now().After(deadline) {
			h.t.Fatalf("the relay never logged %q", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeStdin ends the relay's input, as an editor that exits does.
func (h *harness) closeStdin() { h.stdin.Close() }

// readLine reads the next line of the relay's stdout, without its "\n".
func (h *harness) readLine() []byte {
	h.t.Helper()
	h.stdout.SetReadDeadline(time.Now().Add(hangAfter))
	b, err := h.out.ReadBytes('\n')
	if err != nil {
		h.t.Fatalf("read stdout: %v (got %q)", err, b)
	}
	return b[:len(b)-1]
}

// readReply reads the next line and decodes it as a JSON-RPC response.
func (h *harness) readReply() rpcReply {
	h.t.Helper()
	b := h.readLine()
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		h.t.Fatalf("stdout line %q: %v", b, err)
	}
	r.raw = string(b)
	return r
}

type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// wait waits for Run to return and returns its error.
func (h *harness) wait() error {
	h.t.Helper()
	if h.ended {
		return h.err
	}
	select {
	case h.err = <-h.done:
		h.ended = true
	case <-time.After(hangAfter):
		h.t.Fatal("Run did not return")
	}
	return h.err
}

// expectEOF checks that the relay wrote nothing more to stdout.
func (h *harness) expectEOF() {
	h.t.Helper()
	h.stdout.SetReadDeadline(time.Now().Add(hangAfter))
	if b, err := h.out.ReadBytes('\n'); err != io.EOF || len(b) > 0 {
		h.t.Errorf("stdout after the last reply: %q, %v; want EOF", b, err)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// checkGoroutines fails the test if a goroutine of the relay outlives
// Run. The reaper of a started flyd is the documented exception.
func checkGoroutines(t *testing.T) {
	t.Helper()
	ours := regexp.MustCompile(`/shim/[a-z_]+\.go:\d+`)
	var leaked []string
	for deadline := time.Now().Add(3 * time.Second); ; {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "startFlyd.func") {
				continue
			}
			for _, m := range ours.FindAllString(g, -1) {
				if !strings.Contains(m, "_test.go:") {
					leaked = append(leaked, g)
					break
				}
			}
			if strings.Contains(g, "net/http.(*persistConn)") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left after Run:\n%s", strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRelayHeaders(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	workspace := "/home/u/src/a dir/ü+&%"
	env := map[string]string{"PATH": "/bin:/usr/bin", "HOME": "/home/u", "FLUTTER_ROOT": "/opt/flutter", "SECRET": "x"}
	h := startRelay(t, Config{
		Socket: sock, Workspace: workspace,
		Env: wire.EncodeEnv([]string{"PATH=/bin:/usr/bin", "HOME=/home/u", "FLUTTER_ROOT=/opt/flutter", "SECRET=x"}),
	})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if r := h.readReply(); string(r.ID) != "1" || string(r.Result) != `{"method":"initialize"}` {
		t.Errorf("reply = %s, want the result of initialize", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)

	p.waitSession(t)
	requests, _, closed := p.log()
	if len(requests) != 1 {
		t.Fatalf("peer saw %d upgrade requests, want 1", len(requests))
	}
	hdr := requests[0]
	if got, err := url.QueryUnescape(hdr.Get(wire.HeaderWorkspace)); err != nil || got != workspace {
		t.Errorf("%s = %q (unescaped %q, %v), want %q", wire.HeaderWorkspace, hdr.Get(wire.HeaderWorkspace), got, err, workspace)
	}
	gotEnv := wire.DecodeEnv(hdr.Get(wire.HeaderEnv)) // all of it: runs get the client's environment
	if len(gotEnv) != len(env) {
		t.Errorf("%s decodes to %v, want %v", wire.HeaderEnv, gotEnv, env)
	}
	for k, v := range env {
		if gotEnv[k] != v {
			t.Errorf("%s[%s] = %q, want %q", wire.HeaderEnv, k, gotEnv[k], v)
		}
	}
	if got := hdr.Get(wire.HeaderVersion); got != wire.VersionHeader() {
		t.Errorf("%s = %q, want %q", wire.HeaderVersion, got, wire.VersionHeader())
	}
	if got := hdr.Get("Sec-WebSocket-Protocol"); got != wire.Subprotocol {
		t.Errorf("Sec-WebSocket-Protocol = %q, want %q", got, wire.Subprotocol)
	}
	if len(closed) != 1 || closed[0] != websocket.StatusNormalClosure {
		t.Errorf("peer saw close statuses %v, want [%v]", closed, websocket.StatusNormalClosure)
	}
}

func TestRelayLargeLine(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := startRelay(t, Config{Socket: sock})
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	line := `{"jsonrpc":"2.0","method":"echo","params":{"data":"` + string(data) + `"}}`
	h.send(line)
	if got := h.readLine(); string(got) != line {
		t.Errorf("echo of a %d-byte line: got %d bytes, want it intact", len(line), len(got))
	}
	// Then a small one, through the same buffers.
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if r := h.readReply(); string(r.ID) != "2" {
		t.Errorf("reply = %s, want id 2", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkGoroutines(t)
}

func TestRelayParseError(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	h.send(`not json`)
	r := h.readReply()
	if string(r.ID) != "null" || r.Error == nil || r.Error.Code != -32700 || !strings.HasPrefix(r.Error.Message, "parse error: ") {
		t.Errorf("reply to invalid JSON = %s, want a -32700 parse error with id null", r.raw)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"method":"x"`) // truncated
	if r := h.readReply(); r.Error == nil || r.Error.Code != -32700 {
		t.Errorf("reply to truncated JSON = %s, want a parse error", r.raw)
	}
	// Blank lines are skipped; CRLF endings are fine; the relay goes on.
	h.send("")
	h.send("  \t")
	h.send(`{"jsonrpc":"2.0","id":"b","method":"still/here"}` + "\r")
	if r := h.readReply(); string(r.ID) != `"b"` || r.Error != nil {
		t.Errorf("reply = %s, want the result for id \"b\"", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	if _, received, _ := p.log(); len(received) != 1 || received[0] != "still/here" {
		t.Errorf("peer received methods %q, want only [still/here]", received)
	}
	checkGoroutines(t)
}

func TestRelayEOFWaitsForInflight(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	h.send(`{"jsonrpc":"2.0","id":9,"method":"slow"}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.closeStdin()
	if r := h.readReply(); string(r.ID) != "9" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 9", r.raw)
	}
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	p.waitSession(t)
	if _, _, closed := p.log(); len(closed) != 1 || closed[0] != websocket.StatusNormalClosure {
		t.Errorf("peer saw close statuses %v, want [%v]", closed, websocket.StatusNormalClosure)
	}
	checkGoroutines(t)
}

func TestRelayBatch(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := newHarness(t, Config{Socket: sock})
	h.relay.drainTimeout = time.Hour // the test times out unless both ids clear
	h.start()
	h.send(`[{"jsonrpc":"2.0","id":1,"method":"slow"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"2","method":"b"}]`)
	h.closeStdin()
	var replies []rpcReply
	b := h.readLine()
	if err := json.Unmarshal(b, &replies); err != nil || len(replies) != 2 {
		t.Fatalf("reply to a batch = %s, want a batch of 2 (%v)", b, err)
	}
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
}

func TestRelayServerRequest(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := newHarness(t, Config{Socket: sock})
	h.relay.drainTimeout = time.Hour
	h.start()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	// flyd's request reuses id 1: it carries a method, so it must not
	// clear the client's request 1.
	if r := h.readReply(); string(r.ID) != "1" || r.Method != "roots/list" {
		t.Fatalf("got %s, want flyd's roots/list request", r.raw)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`)
	h.closeStdin()
	if r := h.readReply(); string(r.ID) != "1" || string(r.Result) != `{"asked":true}` {
		t.Errorf("got %s, want the reply to ask", r.raw)
	}
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
}

func TestRelayCompactsReplies(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := startRelay(t, Config{Socket: sock})
	h.send(`{"jsonrpc":"2.0","id":3,"method":"pretty"}`)
	if got, want := string(h.readLine()), `{"jsonrpc":"2.0","id":3,"result":{"a":[1,2]}}`; got != want {
		t.Errorf("multi-line reply written as %s, want %s", got, want)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestRelayOversized(t *testing.T) {
	p := newPeer()
	p.header = map[string][]string{
		wire.HeaderVersion:    {wire.VersionHeader()},
		wire.HeaderMaxMessage: {"1000"},
	}
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	pad := strings.Repeat("x", 2000)
	big := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"p":"` + pad + `"}}`
	h.send(big)
	r := h.readReply()
	want := "message of " + strconv.Itoa(len(big)) + " bytes exceeds flyd's limit of 1000 bytes (flyd --max-message-mb)"
	if string(r.ID) != "7" || r.Error == nil || r.Error.Code != -32600 || r.Error.Message != want {
		t.Errorf("reply to an oversized request = %s, want -32600 %q for id 7", r.raw, want)
	}
	// An oversized notification is dropped without a reply.
	h.send(`{"jsonrpc":"2.0","method":"notifications/big","params":{"p":"` + pad + `"}}`)
	h.send(`{"jsonrpc":"2.0","id":8,"method":"small"}`)
	if r := h.readReply(); string(r.ID) != "8" || r.Error != nil {
		t.Errorf("next reply = %s, want the result for id 8", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	if _, received, _ := p.log(); len(received) != 1 || received[0] != "small" {
		t.Errorf("peer received methods %q, want only [small]", received)
	}
}

func TestRelayVersionMismatch(t *testing.T) {
	tests := []struct {
		name    string
		header  map[string][]string
		status  int
		wantErr string
	}{
		{"newer flyd", map[string][]string{wire.HeaderVersion: {"9.0.0 protocol=99"}}, 0, "upgrade flyctl"},
		{"older flyd", map[string][]string{wire.HeaderVersion: {"0.0.1 protocol=0"}}, 0, "upgrade flyd"},
		{"no header", map[string][]string{}, 0, "upgrade flyd"},
		{"refused, newer flyd", map[string][]string{wire.HeaderVersion: {"9.0.0 protocol=99"}}, 426, "upgrade flyctl"},
		{"412 from flyd", nil, 412, "412 Precondition Failed: refused by the test"},
		{"refused", nil, 403, "refused the session: 403 Forbidden: refused by the test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPeer()
			p.header, p.status = tt.header, tt.status
			sock := startPeer(t, p)
			h := startRelay(t, Config{Socket: sock})
			// The client hears why, in the reply to its initialize.
			h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
			r := h.readReply()
			if string(r.ID) != "1" || r.Error == nil || r.Error.Code != -32603 || !strings.Contains(r.Error.Message, tt.wantErr) {
				t.Errorf("reply to initialize = %s, want a -32603 error containing %q", r.raw, tt.wantErr)
			}
			h.closeStdin()
			err := h.wait()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
			h.expectEOF()
			checkGoroutines(t)
		})
	}
}

// TestRelayRefusalLingers: with no session possible and a client that
// keeps its stdin open, the relay answers for refuseLinger, then exits.
func TestRelayRefusalLingers(t *testing.T) {
	p := newPeer()
	p.header = map[string][]string{wire.HeaderVersion: {"9.0.0 protocol=99"}}
	sock := startPeer(t, p)
	h := newHarness(t, Config{Socket: sock})
	h.relay.refuseLinger = 300 * time.Millisecond
	h.start()
	h.send(`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}`)
	h.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	if r := h.readReply(); string(r.ID) != `"a"` || r.Error == nil || !strings.Contains(r.Error.Message, "upgrade flyctl") {
		t.Errorf("reply = %s, want the version error for \"a\"", r.raw)
	}
	var batch []rpcReply
	if b := h.readLine(); json.Unmarshal(b, &batch) != nil || len(batch) != 1 || string(batch[0].ID) != "2" || batch[0].Error == nil {
		t.Errorf("reply to a batch = %s, want a batch of one error for id 2", b)
	}
	start := time.Now()
	if err := h.wait(); err == nil || !strings.Contains(err.Error(), "upgrade flyctl") {
		t.Errorf("Run = %v, want the version error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run lingered %v, want about 300ms", d)
	}
	h.expectEOF()
	checkGoroutines(t)
}

func TestRelayNoDaemon(t *testing.T) {
	dir := shortTempDir(t)
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for name, sock := range map[string]string{
		"no socket":    filepath.Join(dir, "none.sock"),
		"no directory": filepath.Join(dir, "none", "flyd.sock"),
		"stale socket": stale,
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			h := startRelay(t, Config{Socket: sock, StateDir: filepath.Join(dir, "state")})
			h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
			if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd is not running: nothing listens on "+sock) {
				t.Errorf("reply = %s, want an error saying flyd is not running", r.raw)
			}
			h.closeStdin()
			err := h.wait()
			if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), sock) {
				t.Errorf("Run = %v, want ErrNotRunning naming %s", err, sock)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Run took %v to fail, want it fast", d)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
				t.Errorf("state dir: %v; want it not created without Flyd", err)
			}
			checkGoroutines(t)
		})
	}
}

// TestRelayConnectionLost: with reconnecting turned off, a lost
// connection ends Run and the requests in flight get an error.
func TestRelayConnectionLost(t *testing.T) {
	tests := []struct{ how, wantReason string }{
		{"drop", "closed unexpectedly"},
		{"goaway", "1001 shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.how, func(t *testing.T) {
			sock := startPeer(t, newPeer())
			h := startRelay(t, Config{Socket: sock, ReconnectTimeout: -1})
			h.send(`{"jsonrpc":"2.0","id":"h1","method":"hang"}`)
			h.send(`{"jsonrpc":"2.0","id":2,"method":"hang"}`)
			h.send(`{"jsonrpc":"2.0","method":"` + tt.how + `"}`)
			got := map[string]string{}
			for range 2 {
				r := h.readReply()
				if r.Error == nil || r.Error.Code != -32603 || !strings.HasPrefix(r.Error.Message, "flyd connection lost: ") ||
					!strings.Contains(r.Error.Message, tt.wantReason) {
					t.Errorf("reply = %s, want a -32603 'flyd connection lost: ...%s...' error", r.raw, tt.wantReason)
				}
				got[string(r.ID)] = r.raw
			}
			if len(got) != 2 || got[`"h1"`] == "" || got["2"] == "" {
				t.Errorf("errors for ids %v, want \"h1\" and 2", got)
			}
			err := h.wait()
			if err == nil || !strings.Contains(err.Error(), "flyd connection lost") {
				t.Errorf("Run = %v, want a 'flyd connection lost' error", err)
			}
			h.expectEOF()
			checkGoroutines(t)
		})
	}
}

func TestRelayCancel(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"hang"}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	h.readReply() // the session is up and the hanging request sent
	h.cancel()
	if err := h.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	h.expectEOF() // no error replies: the client is going away
	checkGoroutines(t)
	p.waitSession(t)
	if _, _, closed := p.log(); len(closed) != 1 || closed[0] != websocket.StatusGoingAway {
		t.Errorf("peer saw close statuses %v, want [%v]", closed, websocket.StatusGoingAway)
	}
}

func TestRelayDrainTimeout(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := newHarness(t, Config{Socket: sock})
	h.relay.drainTimeout = 200 * time.Millisecond
	h.start()
	h.send(`{"jsonrpc":"2.0","id":5,"method":"hang"}`)
	h.closeStdin()
	if r := h.readReply(); string(r.ID) != "5" || r.Error == nil || r.Error.Code != -32603 {
		t.Errorf("reply = %s, want a -32603 error for id 5", r.raw)
	}
	if err := h.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestRelayWriteTimeout: when flyd stops reading, a write that cannot
// finish ends the connection after the write timeout, and the requests in
// flight get an error, rather than the relay hanging on the write.
func TestRelayWriteTimeout(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := newHarness(t, Config{Socket: sock, ReconnectTimeout: -1})
	h.relay.writeTimeout = 200 * time.Millisecond
	h.start()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"stall"}`)
	// Far more than the socket's buffers hold.
	h.send(`{"jsonrpc":"2.0","id":2,"method":"big","params":{"pad":"` + strings.Repeat("x", 16<<20) + `"}}`)
	for range 2 {
		if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd connection lost") {
			t.Errorf("reply = %.200s, want a 'flyd connection lost' error", r.raw)
		}
	}
	if err := h.wait(); err == nil || !strings.Contains(err.Error(), "flyd connection lost") {
		t.Errorf("Run = %v, want a 'flyd connection lost' error", err)
	}
	checkGoroutines(t)
}

// TestRelayStdoutGone checks that a client that stops reading its stdout
// ends the relay once its input ends, with the write error.
func TestRelayStdoutGone(t *testing.T) {
	sock := startPeer(t, newPeer())
	h := startRelay(t, Config{Socket: sock})
	h.stdout.Close()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	h.closeStdin()
	err := h.wait()
	if err == nil || !strings.Contains(err.Error(), "write to stdout") {
		t.Errorf("Run = %v, want a stdout write error", err)
	}
	checkGoroutines(t)
}

// setHelperEnv makes flyd started by a relay run the test binary as the
// fake flyd in mode, on sock and state.
func setHelperEnv(t *testing.T, mode, sock, state string) []string {
	t.Setenv(helperEnv, mode)
	t.Setenv("FLY_SOCKET", sock)
	t.Setenv("FLY_STATE_DIR", state)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(state, helperPIDFile))
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(string(b)); err == nil {
			proc.SignalProcess(pid, proc.Kill)
		}
	})
	return []string{exe, "run"}
}

func TestAutostart(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "late", sock, state)
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	if r := h.readReply(); string(r.ID) != "1" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 1", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(state, "flyd.log")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("flyd.log: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

func TestAutostartExits(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "fail", sock, state)
	os.MkdirAll(state, 0o700)
	os.WriteFile(filepath.Join(state, "flyd.log"), []byte("an earlier run\n"), 0o600)
	start := time.Now()
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd, StartTimeout: 10 * time.Second})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd exited (exit status 1)") {
		t.Errorf("reply = %s, want an error saying flyd exited", r.raw)
	}
	h.closeStdin()
	err := h.wait()
	if err == nil {
		t.Fatal("Run = nil, want an error")
	}
	msg := err.Error()
	for _, want := range []string{"flyd exited (exit status 1)", sock, filepath.Join(state, "flyd.log"),
		"flyd: line 07", "flyd: line 15", "flyd: cannot open fly.db: boom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Run = %q, want it to contain %q", msg, want)
		}
	}
	for _, unwanted := range []string{"flyd: line 06", "an earlier run"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("Run = %q, want only the last 10 lines of this start's log, not %q", msg, unwanted)
		}
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Run took %v to report the exit, want about %v", d, exitGrace)
	}
	h.expectEOF()
}

func TestAutostartTimeout(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "mute", sock, state)
	start := time.Now()
	h := startRelay(t, Config{Socket: sock, StateDir: state, Flyd: flyd, StartTimeout: 700 * time.Millisecond})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if r := h.readReply(); r.Error == nil || !strings.Contains(r.Error.Message, "flyd did not answer on "+sock) {
		t.Errorf("reply = %s, want an error saying flyd did not answer", r.raw)
	}
	h.closeStdin()
	err := h.wait()
	want := "flyd did not answer on " + sock + " within 700ms; its log is " + filepath.Join(state, "flyd.log")
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "flyd: opening fly.db") {
		t.Errorf("Run = %v, want %q and the log's tail", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v, want about 700ms", d)
	}
	h.expectEOF()
}
