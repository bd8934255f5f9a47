package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// peer is a scripted flyd: a real WebSocket server on a real Unix socket.
// What it does with a message depends on the message's method:
//
//	echo (notification)  sends the message back as it came
//	slow (request)       replies after 300ms
//	hang (request)       never replies
//	pretty (request)     replies with an indented, multi-line response
//	ask (request)        first sends a server->client request with the
//	                     same id, waits for the client's response, then
//	                     replies
//	drop (notification)  closes the connection without a close frame
//	goaway (notification) closes it with StatusGoingAway
//	resources/subscribe  replies with an error when params.uri starts
//	                     with "bad:"
//	initialize           in the first session, never replies if hangInit
//	anything else        requests get {"result":{"method":M}}
//
// A batch gets a batch of the replies to its requests.
type peer struct {
	// header is set on every reply; nil means a correct X-Fly-Version.
	header http.Header
	// status, if set, refuses the upgrade with that HTTP status.
	status int
	// hangInit makes the first session leave initialize unanswered.
	hangInit bool

	ctx    context.Context // ends every session
	cancel context.CancelFunc
	wg     sync.WaitGroup // sessions

	mu       sync.Mutex
	requests []http.Header // upgrade requests seen
	received []string      // methods received, in order ("" for others)
	msgs     []peerRecord  // the same, with more detail
	closed   []websocket.StatusCode
	nsess    int                          // sessions accepted so far
	conns    map[*websocket.Conn]struct{} // sessions open now
	srv      *http.Server                 // serving now; nil while down
	served   chan struct{}                // closed when srv's Serve returns
	sessions chan struct{}                // receives when a session ends
}

// peerRecord is one message the peer received.
type peerRecord struct {
	session int    // 1 for the first session
	method  string // "" for a response
	id      string // as sent, "" for a notification
	uri     string // params.uri
}

func newPeer() *peer {
	ctx, cancel := context.WithCancel(context.Background())
	return &peer{ctx: ctx, cancel: cancel, sessions: make(chan struct{}, 100), conns: make(map[*websocket.Conn]struct{})}
}

// startPeer serves p on a new socket in a short temp dir and returns the
// socket's path. Cleanup stops the server and waits for its sessions.
func startPeer(t *testing.T, p *peer) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "flyd.sock")
	p.up(t, sock)
	t.Cleanup(func() {
		p.down(t)
		p.cancel()
		p.wg.Wait()
	})
	return sock
}

// up serves p on sock, which must not exist.
func (p *peer) up(t *testing.T, sock string) {
	t.Helper()
	ln, err := ipc.Listen(endpointOf(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	served := make(chan struct{})
	go func() { // owned by the peer: down waits for it
		defer close(served)
		srv.Serve(ln)
	}()
	p.mu.Lock()
	p.srv, p.served = srv, served
	p.mu.Unlock()
}

// down stops serving, as a flyd that exits: the socket goes away and
// every open session ends without a close frame.
func (p *peer) down(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	srv, served := p.srv, p.served
	p.srv = nil
	p.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	<-served
	p.dropAll()
}

// dropAll ends every open session without a close frame.
func (p *peer) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.CloseNow()
	}
}

// waitFor waits until the peer has received a message with method.
func (p *peer) waitFor(t *testing.T, method string) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for {
		_, received, _ := p.log()
		for _, m := range received {
			if m == method {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer never received %s (got %q)", method, received)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// records returns what the peer received in session n.
func (p *peer) records(n int) []peerRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []peerRecord
	for _, m := range p.msgs {
		if m.session == n {
			out = append(out, m)
		}
	}
	return out
}

// shortTempDir returns a temp dir whose path fits in a sockaddr_un.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (p *peer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r.Header.Clone())
	p.mu.Unlock()
	if p.header == nil {
		w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
	}
	for k, v := range p.header {
		w.Header()[k] = v
	}
	if r.URL.Path != wire.RouteMCP {
		http.NotFound(w, r)
		return
	}
	if p.status != 0 {
		http.Error(w, "refused by the test", p.status)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wire.Subprotocol}})
	if err != nil {
		return
	}
	p.wg.Add(1)
	defer p.wg.Done()
	defer func() { p.sessions <- struct{}{} }()
	c.SetReadLimit(-1)
	p.mu.Lock()
	p.nsess++
	n := p.nsess
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	p.serve(c, n)
}

type peerMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params struct {
		URI string `json:"uri"`
	} `json:"params"`
}

func (p *peer) serve(c *websocket.Conn, session int) {
	ctx := p.ctx
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			p.mu.Lock()
			p.closed = append(p.closed, websocket.CloseStatus(err))
			p.mu.Unlock()
			c.CloseNow()
			return
		}
		var msgs []peerMsg
		batch := len(b) > 0 && b[0] == '['
		if batch {
			json.Unmarshal(b, &msgs)
		} else {
			var m peerMsg
			json.Unmarshal(b, &m)
			msgs = []peerMsg{m}
		}
		var replies []json.RawMessage
		for _, m := range msgs {
			p.mu.Lock()
			p.received = append(p.received, m.Method)
			p.msgs = append(p.msgs, peerRecord{session: session, method: m.Method, id: string(m.ID), uri: m.Params.URI})
			p.mu.Unlock()
			switch {
			case m.Method == "initialize" && p.hangInit && session == 1:
				continue
			case m.Method == "resources/subscribe" && strings.HasPrefix(m.Params.URI, "bad:"):
				replies = append(replies, json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32002,"message":"no such resource"}}`, m.ID)))
				continue
			}
			switch m.Method {
			case "echo":
				c.Write(ctx, websocket.MessageText, b)
			case "drop":
				c.CloseNow()
				return
			case "goaway":
				c.Close(websocket.StatusGoingAway, "shutting down")
				return
			case "hang":
			case "stall": // stop reading: the relay's writes back up
				<-ctx.Done()
				c.CloseNow()
				return
			case "slow":
				time.Sleep(300 * time.Millisecond)
				replies = append(replies, reply(m.ID, `{}`))
			case "pretty":
				replies = append(replies, json.RawMessage(fmt.Sprintf("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"result\": {\n    \"a\": [1, 2]\n  }\n}", m.ID)))
			case "ask":
				c.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"roots/list"}`, m.ID)))
				if _, _, err := c.Read(ctx); err != nil { // the client's response
					return
				}
				replies = append(replies, reply(m.ID, `{"asked":true}`))
			default:
				if len(m.ID) > 0 && m.Method != "" {
					replies = append(replies, reply(m.ID, fmt.Sprintf(`{"method":%q}`, m.Method)))
				}
			}
		}
		if len(replies) == 0 {
			continue
		}
		out := replies[0]
		if batch {
			out, _ = json.Marshal(replies)
		}
		if err := c.Write(ctx, websocket.MessageText, out); err != nil {
			return
		}
	}
}

func reply(id json.RawMessage, result string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

// waitSession waits for a session to end on the peer's side.
func (p *peer) waitSession(t *testing.T) {
	t.Helper()
	select {
	case <-p.sessions:
	case <-time.After(hangAfter):
		t.Fatal("the peer's session did not end")
	}
}

func (p *peer) log() (requests []http.Header, received []string, closed []websocket.StatusCode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, append([]string(nil), p.received...), append([]websocket.StatusCode(nil), p.closed...)
}

// The test binary doubles as a fake flyd, as os/exec's tests do: with
// helperEnv set, TestMain runs helperFlyd instead of the tests. It finds
// its socket and state dir like flyd does, from FLY_SOCKET and
// FLY_STATE_DIR, and writes its pid to helperPIDFile in the state dir.
const (
	helperEnv     = "FLY_SHIM_TEST_FLYD"
	helperPIDFile = "helper.pid"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperFlyd(mode))
	}
	// Every goroutine a relay starts is gone when its test ends.
	goleak.VerifyTestMain(m)
}

// helperFlyd is the fake flyd. Modes:
//
//	late  listens after 300ms, serves one session, then exits 0
//	fail  writes 15 numbered lines and an error to stderr, exits 1
//	mute  writes one line, never listens, and sleeps
//	serve listens at once and serves until killed
func helperFlyd(mode string) int {
	p, err := paths.Resolve(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	os.WriteFile(filepath.Join(p.StateDir, helperPIDFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
	// Never outlive the test by much.
	time.AfterFunc(30*time.Second, func() { os.Exit(3) })
	switch mode {
	case "late":
		time.Sleep(300 * time.Millisecond)
		ln, err := ipc.Listen(p.Socket)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pr := newPeer()
		go http.Serve(ln, pr)
		<-pr.sessions
		return 0
	case "serve":
		os.Remove(p.Socket) // left behind by a killed one
		ln, err := ipc.Listen(p.Socket)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		http.Serve(ln, newPeer())
		return 1
	case "fail":
		for i := 1; i <= 15; i++ {
			fmt.Fprintf(os.Stderr, "flyd: line %02d\n", i)
		}
		fmt.Fprintln(os.Stderr, "flyd: cannot open fly.db: boom")
		return 1
	case "mute":
		fmt.Fprintln(os.Stderr, "flyd: opening fly.db")
		time.Sleep(time.Minute)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", helperEnv, mode)
	return 2
}
