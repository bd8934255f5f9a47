package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/wire"
)

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
	ln, err := ipc.Listen(endpointOf(t, stale)) // it leaves its socket file behind when closed
	if err != nil {
		t.Fatal(err)
	}
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
			sock := endpointOf(t, sock)
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
