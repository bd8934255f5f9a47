package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

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
//	anything else        requests get {"result":{"method":M}}
//
// A batch gets a batch of the replies to its requests.
type peer struct {
	// header is set on every reply; nil means a correct X-Fly-Version.
	header http.Header
	// status, if set, refuses the upgrade with that HTTP status.
	status int

	ctx    context.Context // ends every session
	cancel context.CancelFunc
	wg     sync.WaitGroup // sessions

	mu       sync.Mutex
	requests []http.Header // upgrade requests seen
	received []string      // methods received, in order ("" for others)
	closed   []websocket.StatusCode
	sessions chan struct{} // receives when a session ends
}

func newPeer() *peer {
	ctx, cancel := context.WithCancel(context.Background())
	return &peer{ctx: ctx, cancel: cancel, sessions: make(chan struct{}, 100)}
}

// startPeer serves p on a new socket in a short temp dir and returns the
// socket's path. Cleanup stops the server and waits for its sessions.
func startPeer(t *testing.T, p *peer) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "flyd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
		p.cancel()
		p.wg.Wait()
	})
	return sock
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
	p.serve(c)
}

type peerMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
}

func (p *peer) serve(c *websocket.Conn) {
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
			p.mu.Unlock()
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
	case <-time.After(20 * time.Second):
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
	os.Exit(m.Run())
}

// helperFlyd is the fake flyd. Modes:
//
//	late  listens after 300ms, serves one session, then exits 0
//	fail  writes 15 numbered lines and an error to stderr, exits 1
//	mute  writes one line, never listens, and sleeps
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
		ln, err := net.Listen("unix", p.Socket)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pr := newPeer()
		go http.Serve(ln, pr)
		<-pr.sessions
		return 0
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
