package daemon

import (
	"context"
	"log/slog"
	"slices"
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
	id      string
	ws      *workspace
	env     map[string]string // the client's flutter-relevant environment
	peerPID int
	tools   *toolfilter.Filter // the tools the client asked for; nil for all
	via     string             // "socket", "http", "memory"
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

	filesRead   atomic.Int64
	toolsCalled atomic.Int64

	mu   sync.Mutex
	subs map[string]bool // subscribed resource URIs, without query
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
}

func (t sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	n, ok := c.(mcpconn.Notifier)
	if !ok {
		qc := mcpconn.NewQueued(c, t.sess.id, t.timeout, t.sess.abort, t.log)
		c, n = qc, qc
	}
	t.sess.conn = n
	return c, nil
}

// wsTransport hands an accepted WebSocket connection to mcp.Server.Connect.
type wsTransport struct{ c *mcpconn.WebSocket }

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
		_ = s.conn.Notify(method, params)
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
	t.s.mu.Lock()
	sess := t.s.sessions[ss.ID()]
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
