package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/outbox"
	"github.com/fly-dev/fly/internal/wire"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one connected MCP client: the shim of one editor window, a
// WebSocket client, or an in-process transport in tests. It is bound to
// one workspace for its whole life.
type session struct {
	id      string
	ws      *workspace
	env     map[string]string // the client's flutter-relevant environment
	peerPID int
	via     string // "socket", "http", "memory"
	since   time.Time
	conn    notifier

	connected chan struct{} // if not nil, closed once Connect returned (ss is set if it succeeded)
	abort     func()        // if not nil, closes the network connections of its HTTP streams

	// wsMu guards ws while it may still change: a Streamable HTTP session
	// without ?workspace= takes its workspace from the client's roots at
	// its first request (bindWorkspace). Request handlers run after that
	// and read ws directly; anything else calls workspace().
	wsMu sync.Mutex

	ss atomic.Pointer[mcp.ServerSession]

	filesRead   atomic.Int64
	toolsCalled atomic.Int64

	mu   sync.Mutex
	subs map[string]bool // subscribed resource URIs, without query
}

// splicer is a connection that can write a large text of a result without
// the SDK encoding it (see wsConn.stash): a handler puts the placeholder
// stash returns in its result instead of the text.
type splicer interface {
	stash(text string) (placeholder string)
}

// notifier sends a server notification to exactly one client, without
// waiting on a slow one. The go-sdk can only notify every subscriber of a
// URI, and workspace URIs are relative, so the same URI names different
// files in different workspaces: flyd routes its notifications itself.
type notifier interface {
	notify(method string, params any) error
}

func encodeNotification(method string, params any) ([]byte, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
}

func (s *session) subscribed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[uri]
}

func (s *session) setSubscribed(uri string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.subs[uri] = true
	} else {
		delete(s.subs, uri)
	}
}

// ready reports whether the client has initialized: only then may it get
// notifications.
func (s *session) ready() bool {
	ss := s.ss.Load()
	return ss != nil && ss.InitializeParams() != nil
}

// client returns the name and version the client gave in initialize.
func (s *session) client() (name, version string) {
	if ss := s.ss.Load(); ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			return p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	return "", ""
}

// SessionInfo describes a session in fly://sessions/* and /v1/status:
// the wire type.
type SessionInfo = wire.Session

func (s *session) info() SessionInfo {
	name, version := s.client()
	return SessionInfo{
		ID:            s.id,
		ClientName:    name,
		ClientVersion: version,
		Workspace:     s.root(),
		Via:           s.via,
		PeerPID:       s.peerPID,
		Since:         s.since,
		FilesRead:     s.filesRead.Load(),
		ToolsCalled:   s.toolsCalled.Load(),
	}
}

// sessionTransport gives any mcp.Transport's connection the session's id
// and a notifier, and records it in the session. mcp.Server.Connect calls
// Connect synchronously, before the session is visible to notifiers. The
// WebSocket transport's connection is already both; any other goes
// through a queuedConn.
type sessionTransport struct {
	mcp.Transport
	sess    *session
	timeout time.Duration // of one write
	log     *slog.Logger
}

func (t sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	n, ok := c.(notifier)
	if !ok {
		qc := newQueuedConn(c, t.sess.id, t.timeout, t.sess.abort, t.log)
		c, n = qc, qc
	}
	t.sess.conn = n
	return c, nil
}

// queuedConn puts the session's outbox in front of another transport's
// connection (Streamable HTTP, in-memory in tests), whose Write may block
// for as long as its client does not read (the go-sdk's stream write has
// no deadline). One writer goroutine writes in order; a write that misses
// its deadline, or a notification that finds the outbox full, closes the
// session: the inner connection, and through abort the network
// connections of its HTTP streams, which is what unblocks a stuck write.
type queuedConn struct {
	mcp.Connection
	id      string
	timeout time.Duration
	abort   func() // closes the transport's network connections; may be nil
	log     *slog.Logger

	box       *outbox.Queue[queued]
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// queued is one message waiting in a queuedConn's outbox. res, when not
// nil, takes the result of the write.
type queued struct {
	ctx context.Context // the writer's, for the values a transport routes by
	msg jsonrpc.Message
	res chan error
}

// newQueuedConn starts c's writer goroutine, which Close stops and waits for.
func newQueuedConn(c mcp.Connection, id string, timeout time.Duration, abort func(), log *slog.Logger) *queuedConn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &queuedConn{Connection: c, id: id, timeout: timeout, abort: abort, log: log, box: outbox.New[queued]()}
	q.wg.Add(1)
	go q.writeLoop()
	return q
}

func (q *queuedConn) SessionID() string { return q.id }

// Write queues msg. A notification never waits; anything else waits for
// room and then for its write, bounded by the write deadline.
func (q *queuedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	it := queued{ctx: context.WithoutCancel(ctx), msg: msg}
	if isNotification(msg) {
		return q.push(it, false)
	}
	it.res = make(chan error, 1)
	if err := q.push(it, true); err != nil {
		return err
	}
	select {
	case err := <-it.res:
		return err
	case <-q.box.Broken():
		return q.box.Err()
	case <-q.box.Done():
		return outbox.ErrClosed
	}
}

func (q *queuedConn) push(it queued, wait bool) error {
	err := q.box.Push(context.Background(), it, messageSize(it.msg), wait)
	if errors.Is(err, outbox.ErrFull) {
		q.stall(outbox.ErrFull)
	}
	return err
}

// messageSize estimates a message's encoded size for the outbox's byte
// bound.
func messageSize(msg jsonrpc.Message) int {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		return len(m.Method) + len(m.Params) + 64
	case *jsonrpc.Response:
		return len(m.Result) + 64
	}
	return 64
}

func (q *queuedConn) notify(method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return q.push(queued{ctx: context.Background(), msg: &jsonrpc.Request{Method: method, Params: raw}}, false)
}

// writeLoop writes queued messages in order until the outbox closes or
// fails. A write still running at its deadline stalls the session.
func (q *queuedConn) writeLoop() {
	defer q.wg.Done()
	for {
		it, ok := q.box.Take()
		if !ok {
			return
		}
		t := time.AfterFunc(q.timeout, func() { q.stall(errWriteStalled) })
		err := q.Connection.Write(it.ctx, it.msg)
		intime := t.Stop()
		if it.res != nil {
			it.res <- err
		}
		if !intime {
			return
		}
	}
}

var errWriteStalled = errors.New("client is not reading: a write missed its deadline")

// stall gives up on the client: the outbox fails, the network connections
// close (ending a stuck write) and so does the inner connection, which
// ends the session. It never blocks; the first call logs once.
func (q *queuedConn) stall(cause error) {
	if !q.box.Fail(cause) {
		return
	}
	q.log.Warn("session closed: its client does not read", logSession, q.id, logErr, cause)
	if q.abort != nil {
		q.abort()
	}
	_ = q.Connection.Close()
}

// Close implements mcp.Connection: the writer stops (a stuck write ends
// by its deadline at the latest), then the inner connection closes.
func (q *queuedConn) Close() error {
	var err error
	q.closeOnce.Do(func() {
		q.box.Close()
		err = q.Connection.Close()
		if q.abort != nil {
			q.abort()
		}
		q.wg.Wait()
	})
	return err
}

// wsTransport hands an accepted WebSocket connection to mcp.Server.Connect.
type wsTransport struct{ c *wsConn }

func (t wsTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// The methods below make a session an upstream.Session: upstreams
// notify, sample and elicit through them.

func (s *session) ID() string              { return s.id }
func (s *session) Root() string            { return s.root() }
func (s *session) Env() map[string]string  { return s.env }
func (s *session) MCP() *mcp.ServerSession { return s.ss.Load() }

// Notify sends one notification to this client, once it has initialized.
func (s *session) Notify(method string, params any) {
	if s.ready() {
		_ = s.conn.notify(method, params)
	}
}

// workspace returns the session's workspace, nil while it is unbound.
func (s *session) workspace() *workspace {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	return s.ws
}

func (s *session) root() string {
	if w := s.workspace(); w != nil {
		return w.root
	}
	return ""
}
