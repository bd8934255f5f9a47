package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one connected MCP client: the shim of one editor window, a
// WebSocket client, or an in-process transport in tests. It is bound to
// one workspace for its whole life.
type session struct {
	id      string // over Streamable HTTP, the Mcp-Session-Id: never shown to other clients
	handle  string // what others see of it (see newHandle); set by openSession
	ws      *workspace
	env     map[string]string // the client's flutter-relevant environment
	peerPID int
	tools   *toolfilter.Filter // the tools the client asked for; nil for all
	via     string             // "socket", "http", "memory" (ServeTransport)
	since   time.Time
	conn    mcpconn.Notifier

	connected chan struct{} // if not nil, closed once Connect returned (ss is set if it succeeded)
	abort     func()        // if not nil, closes the network connections of its HTTP streams

	// wsMu guards ws while it may still change: a Streamable HTTP session
	// without ?workspace= takes its workspace from the client's roots at
	// its first request (bindWorkspace). Request handlers run after that
	// and read ws directly; anything else calls workspace().
	wsMu sync.Mutex

	ss atomic.Pointer[mcp.ServerSession]

	// stateless marks a session of a 2026-07-28 client over HTTP: it has
	// no SDK session of its own but one per request, each on a connection
	// of its own (see stateless.go).
	stateless bool
	// transient marks a stateless session of one request (no
	// X-Fly-Client): it is not kept in fly://sessions/recent nor the store.
	transient bool

	filesRead   atomic.Int64
	toolsCalled atomic.Int64

	// notifyMu orders a listen stream's acknowledgement with the
	// notifications to it; both only queue, never wait.
	notifyMu  sync.Mutex
	mu        sync.Mutex
	subs      map[string]bool             // subscribed resource URIs, without query (handshake era)
	notifiers map[string]mcpconn.Notifier // its connections, by SDK session id
	listens   []*listenStream             // its open subscriptions/listen streams (2026-07-28)
	named     [2]string                   // a stateless client's name and version, from its last request
}

// listenStream is one subscriptions/listen stream of a 2026-07-28
// client: what it agreed to, and where its notifications go.
type listenStream struct {
	id   any // the listen request's id: each notification carries it
	to   mcpconn.Notifier
	want mcp.NotificationSubscriptions
	uris map[string]bool
}

// wants reports whether the stream asked for this notification.
func (l *listenStream) wants(method string, params any) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.want.ToolsListChanged
	case "notifications/prompts/list_changed":
		return l.want.PromptsListChanged
	case "notifications/resources/list_changed":
		return l.want.ResourcesListChanged
	case "notifications/resources/updated":
		p, ok := params.(*mcp.ResourceUpdatedNotificationParams)
		return ok && l.uris[p.URI]
	}
	return false // logging and the like: 2026-07-28 has them on the request that caused them only
}

// subscribed reports whether the client wants to hear of uri changing:
// by resources/subscribe, or on one of its listen streams.
func (s *session) subscribed(uri string) bool {
	modern := s.modern()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !modern {
		return s.subs[uri]
	}
	for _, l := range s.listens {
		if l.uris[uri] {
			return true
		}
	}
	return false
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
// notifications. A 2026-07-28 client is ready from its first request.
func (s *session) ready() bool {
	if s.stateless {
		return true
	}
	ss := s.ss.Load()
	return ss != nil && ss.InitializeParams() != nil
}

// modern reports whether the client speaks 2026-07-28: it gets
// notifications on its listen streams only.
func (s *session) modern() bool {
	if s.stateless {
		return true
	}
	if ss := s.ss.Load(); ss != nil {
		if p := ss.InitializeParams(); p != nil {
			return wire.IsSessionless(p.ProtocolVersion)
		}
	}
	return false
}

// client returns the name and version the client gave in initialize, or
// in its requests' _meta; bounded, as they are shown.
func (s *session) client() (name, version string) {
	if s.stateless {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.named[0], s.named[1]
	}
	if ss := s.ss.Load(); ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			return mcpconn.BoundText(p.ClientInfo.Name, mcpconn.MaxClientName), mcpconn.BoundText(p.ClientInfo.Version, mcpconn.MaxClientVersion)
		}
	}
	return "", ""
}

// setClient records what a stateless client says of itself.
func (s *session) setClient(c *mcp.Implementation) {
	if c == nil {
		return
	}
	name, version := mcpconn.BoundText(c.Name, mcpconn.MaxClientName), mcpconn.BoundText(c.Version, mcpconn.MaxClientVersion)
	s.mu.Lock()
	s.named = [2]string{name, version}
	s.mu.Unlock()
}

// addConn records a connection of the session, which its listen streams
// may use; dropConn forgets it, with the streams on it.
func (s *session) addConn(id string, n mcpconn.Notifier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notifiers == nil {
		s.notifiers = make(map[string]mcpconn.Notifier)
	}
	s.notifiers[id] = n
}

func (s *session) dropConn(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notifiers[id]
	delete(s.notifiers, id)
	s.listens = slices.DeleteFunc(s.listens, func(l *listenStream) bool { return l.to == n })
}

// SessionInfo describes a session in fly://sessions/* and /v1/status:
// the wire type.
type SessionInfo = wire.Session

func (s *session) info() SessionInfo {
	name, version := s.client()
	return SessionInfo{
		ID:            s.handle, // never s.id: see newHandle
		ClientName:    name,
		ClientVersion: version,
		Workspace:     s.root(),
		Via:           s.via,
		PeerPID:       s.peerPID,
		Since:         s.since,
		FilesRead:     s.filesRead.Load(),
		ToolsCalled:   s.toolsCalled.Load(),
		Tools:         s.toolsText(),
	}
}

func (s *session) toolsText() string {
	if s.tools.Empty() {
		return ""
	}
	return s.tools.String()
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
	abort   func() // if not nil, replaces the session's: closes this connection's network connection
}

func (t sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	n, ok := c.(mcpconn.Notifier)
	if !ok {
		abort := t.abort
		if abort == nil {
			abort = t.sess.abort
		}
		// The connection's own id: a stateless session has one per
		// request (see statelessConnID), which its listen streams and
		// notifiers are filed under; named by the session's, each request
		// would take the place of the one before.
		id := c.SessionID()
		if id == "" {
			id = t.sess.id
		}
		qc := mcpconn.NewQueued(c, id, t.timeout, abort, t.log)
		c, n = qc, qc
	}
	if !t.sess.stateless {
		t.sess.conn = n
	}
	t.sess.addConn(c.SessionID(), n)
	return c, nil
}

// wsTransport hands an accepted WebSocket connection to mcp.Server.Connect.
type wsTransport struct{ c *mcpconn.WebSocket }

func (t wsTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// The methods below make a session an upstream.Session: upstreams
// notify, sample and elicit through them.

func (s *session) ID() string      { return s.id }
func (s *session) Handle() string  { return s.handle }
func (s *session) Transient() bool { return s.transient }

// ClientKey is what a transient session's client says it is, bounded:
// the requests of one client without X-Fly-Client are told apart from
// other clients' by it where nothing better exists (an upstream's
// request for input in the middle of a call; see daemon/upstream).
func (s *session) ClientKey() string {
	name, version := s.client()
	return name + "/" + version
}
func (s *session) Root() string            { return s.root() }
func (s *session) Env() map[string]string  { return s.env }
func (s *session) MCP() *mcp.ServerSession { return s.ss.Load() }

// Notify sends one notification to this client, once it has initialized.
// A 2026-07-28 client gets it on each listen stream that asked for it,
// stamped with the stream's id, and not at all otherwise.
func (s *session) Notify(method string, params any) {
	if !s.ready() {
		return
	}
	if !s.modern() {
		_ = s.conn.Notify(method, params)
		return
	}
	s.notifyMu.Lock() // after a stream's acknowledgement, not before
	defer s.notifyMu.Unlock()
	s.mu.Lock()
	var to []*listenStream
	for _, l := range s.listens {
		if l.wants(method, params) {
			to = append(to, l)
		}
	}
	s.mu.Unlock()
	for _, l := range to {
		if p, err := withSubscriptionID(params, l.id); err == nil {
			_ = l.to.Notify(method, p)
		}
	}
}

// withSubscriptionID returns params with the listen stream's id in its
// _meta, as 2026-07-28 notifications carry it.
func withSubscriptionID(params any, id any) (map[string]any, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[mcp.MetaKeySubscriptionID] = id
	m["_meta"] = meta
	return m, nil
}

// Listen records a listen stream on the connection conn until ctx ends,
// sending its acknowledgement first (see mcpserver.Session).
func (s *session) Listen(ctx context.Context, conn string, id any, agreed mcp.NotificationSubscriptions, ack func() error) error {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if err := ack(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notifiers[conn]
	if n == nil {
		return nil // the request is over already
	}
	l := &listenStream{id: id, to: n, want: agreed, uris: make(map[string]bool)}
	for _, u := range agreed.ResourceSubscriptions {
		l.uris[u] = true
	}
	s.listens = append(s.listens, l)
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.listens = slices.DeleteFunc(s.listens, func(o *listenStream) bool { return o == l })
		s.mu.Unlock()
	})
	return nil
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

// The methods below make a session an mcpserver.Session.

// Workspace returns the session's workspace, nil while it is unbound.
func (s *session) Workspace() mcpserver.Workspace {
	if w := s.workspace(); w != nil {
		return w
	}
	return nil // not a nil *workspace in an interface
}

func (s *session) Info() SessionInfo                 { return s.info() }
func (s *session) Subscribed(uri string) bool        { return s.subscribed(uri) }
func (s *session) SetSubscribed(uri string, on bool) { s.setSubscribed(uri, on) }
func (s *session) FileRead()                         { s.filesRead.Add(1) }
func (s *session) Tools() *toolfilter.Filter         { return s.tools }
func (s *session) ToolCalled()                       { s.toolsCalled.Add(1) }

// Stash gives text to a connection that writes large texts itself.
func (s *session) Stash(text string) string {
	if sp, ok := s.conn.(mcpconn.Splicer); ok {
		return sp.Stash(text)
	}
	return text
}

// sessionTable is the daemon's sessions as the MCP surface sees them.
type sessionTable struct{ s *Server }

func (t sessionTable) Of(ss *mcp.ServerSession) mcpserver.Session {
	id := ss.ID()
	if i := strings.IndexByte(id, '.'); i >= 0 {
		id = id[:i] // a request of a stateless session: see statelessConnID
	}
	t.s.mu.Lock()
	sess := t.s.sessions[id]
	t.s.mu.Unlock()
	if sess == nil {
		return nil
	}
	return sess
}

func (t sessionTable) Bind(ctx context.Context, sess mcpserver.Session) error {
	return t.s.bindWorkspace(ctx, sess.(*session))
}

func (t sessionTable) All() []mcpserver.Session {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	out := make([]mcpserver.Session, 0, len(t.s.sessions))
	for _, sess := range t.s.sessions {
		out = append(out, sess)
	}
	return out
}

// Recent lists the workspace's live sessions, then ended ones, newest
// first: from the store, so they outlive flyd, else from memory.
func (t sessionTable) Recent(root string) []SessionInfo {
	s := t.s
	var w *workspace
	for _, o := range s.ws.list() {
		if o.root == root {
			w = o
		}
	}
	if w == nil {
		return nil
	}
	var out []SessionInfo
	for _, sess := range w.connected() {
		out = append(out, sess.info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return b.Since.Compare(a.Since) })
	if db := s.db; db != nil {
		ended, err := db.Sessions(root, maxRecentSessions)
		if err == nil {
			for _, e := range ended {
				out = append(out, SessionInfo(e))
			}
			return out
		}
		s.log.Warn("read ended sessions", logErr, err)
	}
	w.mu.Lock()
	for i := len(w.recent) - 1; i >= 0; i-- {
		out = append(out, w.recent[i])
	}
	w.mu.Unlock()
	return out
}
