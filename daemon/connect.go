package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/fly-dev/fly/daemon/endpoint"
	"github.com/fly-dev/fly/daemon/mcpconn"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connecting MCP sessions: the WebSocket route, in-process transports, and
// a session's registration while it lasts, its id, handle and tool filter.

// serveMCP upgrades to a WebSocket and serves one MCP session on it until
// either side closes.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	pr, onSocket := endpoint.PeerFrom(r.Context())
	dir := r.URL.Query().Get("workspace")
	var env map[string]string
	if onSocket {
		// The shim's headers: honoured from a checked peer only.
		if d, err := url.QueryUnescape(r.Header.Get(wire.HeaderWorkspace)); err == nil && d != "" {
			dir = d
		}
		env = wire.DecodeEnv(r.Header.Get(wire.HeaderEnv))
	}
	if dir == "" {
		http.Error(w, "no workspace: add ?workspace=/abs/path to the URL", http.StatusBadRequest)
		return
	}
	filter, err := s.toolFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ws, err := s.ws.acquire(dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set(wire.HeaderMaxMessage, strconv.FormatInt(s.cfg.MaxMessageBytes, 10))
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wire.Subprotocol}})
	if err != nil {
		s.ws.release(ws)
		return // Accept has answered
	}
	c.SetReadLimit(s.cfg.MaxMessageBytes)
	sess := &session{
		id:      newID(),
		ws:      ws,
		env:     env,
		peerPID: pr.PID,
		tools:   filter,
		via:     "socket",
	}
	conn := mcpconn.NewWebSocket(c, sess.id, s.cfg.WriteTimeout)
	if err := s.serveSession(context.WithoutCancel(r.Context()), wsTransport{conn}, sess); err != nil {
		s.log.Warn("session failed", logSession, sess.id, logErr, err)
	}
}

// ServeTransport serves one MCP session over t, bound to the workspace
// of dir (opened as for any client, released when the session ends), and
// blocks until the session ends. It is how a program that embeds flyd,
// or a test, connects a client with no listener in between: over an
// in-memory or a stdio transport. The Server need not be running; if it
// is not, Close stops what the sessions started.
func (s *Server) ServeTransport(ctx context.Context, t mcp.Transport, dir string) error {
	ws, err := s.ws.acquire(dir)
	if err != nil {
		return err
	}
	return s.serveSession(ctx, t, &session{id: newID(), ws: ws, via: "memory"})
}

// serveSession connects sess over t and blocks until the session ends.
// It owns the session's registration and its workspace reference.
func (s *Server) serveSession(ctx context.Context, t mcp.Transport, sess *session) error {
	end := s.openSession(sess)
	ss, err := s.surface.MCP().Connect(ctx, sessionTransport{Transport: t, sess: sess, timeout: s.cfg.WriteTimeout, log: s.log}, nil)
	if err != nil {
		if sess.connected != nil {
			close(sess.connected)
		}
		end(nil)
		return fmt.Errorf("connect: %w", err)
	}
	sess.ss.Store(ss)
	if sess.connected != nil {
		close(sess.connected)
	}
	s.log.Info("session started", logSession, sess.id, "workspace", sess.root(), "peer_pid", sess.peerPID)
	end(ss.Wait())
	return nil
}

// openSession registers sess: in the session table (before its SDK
// session connects, so that its requests find it), with the upstreams
// and in its workspace. The returned function undoes that, once the
// session has ended with err: its claims end, its record is kept, its
// workspace reference is released.
func (s *Server) openSession(sess *session) (end func(err error)) {
	s.conns.Add(1)
	sess.since = time.Now()
	peer := s.handleKey.Of(sess.peerPID) // "" for none: openSession gives it a handle of its own
	sess.subs = make(map[string]bool)
	s.mu.Lock()
	if sess.handle == "" {
		sess.handle = newHandle()
		if peer != "" && !s.handleInUseLocked(peer) {
			sess.handle = peer
		}
	}
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	if s.up != nil {
		s.up.Join(sess)
	}
	if w := sess.workspace(); w != nil {
		w.mu.Lock()
		w.sessions[sess] = true
		w.mu.Unlock()
	}
	s.api.Changed()
	return func(err error) {
		defer s.conns.Done()
		defer s.api.Changed()
		if s.up != nil {
			s.up.Leave(sess)
		}
		s.surface.SessionEnded(sess.id, sess.handle) // its claims end with it
		info := sess.info()
		info.Ended = time.Now()
		w := sess.workspace()
		if w != nil {
			w.mu.Lock()
			delete(w.sessions, sess)
			if !sess.transient { // one request is not worth a line of the recent ones
				w.recent = append(w.recent, info)
				if len(w.recent) > maxRecentSessions {
					w.recent = slices.Delete(w.recent, 0, len(w.recent)-maxRecentSessions)
				}
			}
			w.mu.Unlock()
		}
		s.mu.Lock()
		delete(s.sessions, sess.id)
		s.mu.Unlock()
		if !sess.transient && (info.ClientName != "" || sess.ss.Load() != nil) {
			s.saveSession(info)
		}
		if w != nil {
			s.ws.release(w)
		}
		level := slog.LevelInfo
		if sess.transient {
			level = slog.LevelDebug
		}
		s.log.Log(context.Background(), level, "session ended", logSession, sess.id, "client", info.ClientName, "files_read", info.FilesRead)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Debug("session connection", logSession, sess.id, logErr, err)
		}
	}
}

// saveSession keeps an ended session's record in the store.
func (s *Server) saveSession(info SessionInfo) {
	if db := s.db; db != nil {
		// store.Session has SessionInfo's fields: the conversion fails to
		// compile if they drift apart.
		if err := db.PutSession(store.Session(info)); err != nil {
			s.log.Warn("save ended session", logSession, info.ID, logErr, err)
		}
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newHandle returns a session's handle: what every other client, the
// status, the store and the runs' journals see of it (fly://sessions/*,
// "held by", Meanwhile: lines). A session's id is a secret over
// Streamable HTTP, where it is the Mcp-Session-Id that addresses the
// session: whoever knows it can call tools as that client and DELETE its
// session. So the handle is drawn apart, not derived from the id, and no
// lookup anywhere takes a handle for an id.
func newHandle() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// handleInUseLocked reports whether a session has handle h; s.mu is held.
func (s *Server) handleInUseLocked(h string) bool {
	for _, o := range s.sessions {
		if o.handle == h {
			return true
		}
	}
	return false
}

// toolFilter is the tool filter a session asks for in its URL: ?tools=
// and ?disable= (flyctl mcp --tools and --disable put them there). A
// term that names nothing flyd knows is refused, so that a typo does not
// hide tools silently.
func (s *Server) toolFilter(r *http.Request) (*toolfilter.Filter, error) {
	q := r.URL.Query()
	f, err := toolfilter.Parse(q["tools"], q["disable"])
	if err != nil {
		return nil, err
	}
	if err := s.surface.CheckFilter(f); err != nil {
		return nil, err
	}
	return f, nil
}
