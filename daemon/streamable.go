package daemon

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/daemon/endpoint"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/wire"
)

// MCP Streamable HTTP at /mcp: each session is the go-sdk's
// StreamableServerTransport connected through serveSession, like a
// WebSocket session, so that it shares workspaces, runs and per-session
// notifications (which go out on the session's GET stream).

const (
	maxHTTPSessions = 256 // live Streamable HTTP sessions
	headerSessionID = "Mcp-Session-Id"
)

// httpSession is a Streamable HTTP session: its transport, its flyd
// session, and the network connections of its requests in flight, which
// closing the session closes too (a stuck stream write ends only so).
type httpSession struct {
	t    *mcp.StreamableServerTransport // nil for a stateless session (2026-07-28)
	sess *session

	// A stateless session's: its key in httpSessions.byClient ("" for a
	// session of one request), the hash of its X-Fly-Client ("" for
	// none), what ends it, and the count that names its requests'
	// connections.
	key    string
	client string
	stop   func()
	once   sync.Once
	seq    atomic.Uint64

	mu     sync.Mutex
	last   time.Time        // when its last request ended, or began if none has
	active int              // requests in flight, its GET stream included
	conns  map[net.Conn]int // their connections
}

// track records r as in flight until the returned function is called.
func (h *httpSession) track(r *http.Request) (done func()) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	h.mu.Lock()
	h.active++
	h.last = time.Now()
	if c != nil {
		h.conns[c]++
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.active--
		h.last = time.Now()
		if c != nil {
			if h.conns[c]--; h.conns[c] <= 0 {
				delete(h.conns, c)
			}
		}
		h.mu.Unlock()
	}
}

// idle is how long the session has had no request in flight; 0 while it
// has one (an open GET stream is a client listening, not an idle one).
func (h *httpSession) idle() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active > 0 {
		return 0
	}
	return time.Since(h.last)
}

// abort closes the network connections of the session's requests in
// flight. It never blocks.
func (h *httpSession) abort() {
	h.mu.Lock()
	conns := make([]net.Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// close ends the session at once: the SDK session (or a stateless
// one's fly session), then its streams.
func (h *httpSession) close() {
	if ss := h.sess.ss.Load(); ss != nil {
		ss.Close()
	}
	if h.stop != nil {
		h.once.Do(h.stop)
	}
	h.abort()
}

// connKey keys the net.Conn of a request in its context (ConnContext).
type connKey struct{}

// httpSessions are the live Streamable HTTP sessions by id.
type httpSessions struct {
	mu       sync.Mutex
	m        map[string]*httpSession
	byClient map[string]*httpSession // the stateless ones, by what identifies their client
}

func (hs *httpSessions) get(id string) *httpSession {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.m[id]
}

func (hs *httpSessions) remove(id string) {
	hs.mu.Lock()
	if h := hs.m[id]; h != nil && h.key != "" && hs.byClient[h.key] == h {
		delete(hs.byClient, h.key)
	}
	delete(hs.m, id)
	hs.mu.Unlock()
}

// serveStreamable serves /mcp.
func (s *Server) serveStreamable(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxMessageBytes)
	}
	if id := r.Header.Get(headerSessionID); id != "" {
		h := s.http.get(id)
		if h == nil || h.t == nil { // a stateless session's id names no Mcp-Session-Id
			http.Error(w, "no such MCP session (flyd restarted, or it was closed): initialize again", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodDelete {
			s.http.remove(id)
			h.close()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method == http.MethodPost {
			if msg, code := mcpconn.CheckBatch(r, h.sess.ss.Load()); msg != "" {
				http.Error(w, msg, code)
				return
			}
		}
		defer h.track(r)()
		h.t.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		if wire.IsSessionless(r.Header.Get(mcpconn.ProtocolHeader)) {
			http.Error(w, "Method Not Allowed: MCP 2026-07-28 has POST only (notifications come on a subscriptions/listen POST)", http.StatusMethodNotAllowed)
			return
		}
		http.Error(w, "no "+headerSessionID+": start a session with an initialize POST", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	// Both eras: a request of the sessionless one stands alone; in the
	// handshake one, only an initialize starts a session.
	if mcpconn.IsStateless(r, body) {
		s.serveStateless(w, r, body)
		return
	}
	if v := r.Header.Get(mcpconn.ProtocolHeader); v != "" && !slices.Contains(mcpserver.ProtocolVersions(), v) {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(mcpserver.ProtocolVersions(), ",")+")", http.StatusBadRequest)
		return
	}
	var first struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &first) != nil || first.Method != "initialize" {
		http.Error(w, "Bad Request: no "+headerSessionID+": start a session with an initialize request", http.StatusBadRequest)
		return
	}
	if msg, err := jsonrpc.DecodeMessage(body); err == nil {
		if b, err := jsonrpc.EncodeMessage(mcpconn.BoundInitializeMessage(msg)); err == nil {
			body = b // what the client said of itself, bounded before the SDK keeps it
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	dir := r.URL.Query().Get("workspace")
	if _, onSocket := endpoint.PeerFrom(r.Context()); dir == "" && onSocket {
		if d, err := url.QueryUnescape(r.Header.Get(wire.HeaderWorkspace)); err == nil {
			dir = d
		}
	}
	filter, err := s.toolFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.roomForHTTPSession() {
		http.Error(w, "too many MCP sessions over HTTP; close some (DELETE /mcp with their "+headerSessionID+")", http.StatusServiceUnavailable)
		return
	}
	// Without a workspace, the session takes the client's first root at
	// its first request (bindWorkspace), or answers with how to name one.
	var ws *workspace
	if dir != "" {
		if ws, err = s.ws.acquire(dir); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	pr, _ := endpoint.PeerFrom(r.Context())
	sess := &session{id: newID(), ws: ws, peerPID: pr.PID, tools: filter, via: "http", connected: make(chan struct{})}
	h := &httpSession{t: &mcp.StreamableServerTransport{SessionID: sess.id}, sess: sess, last: time.Now(), conns: map[net.Conn]int{}}
	sess.abort = h.abort
	defer h.track(r)()
	s.http.mu.Lock()
	s.http.m[sess.id] = h
	s.http.mu.Unlock()
	s.httpWG.Go(func() { // owned by the server: shutdown closes the session and waits
		defer s.http.remove(sess.id)
		if err := s.serveSession(context.Background(), h.t, sess); err != nil {
			s.log.Warn("session failed", logSession, sess.id, logErr, err)
		}
	})
	<-sess.connected
	if sess.ss.Load() == nil {
		http.Error(w, "could not start the MCP session", http.StatusInternalServerError)
		return
	}
	h.t.ServeHTTP(w, r)
}

// roomForHTTPSession reports whether a new handshake-era session fits;
// when the table is full, it closes the longest-idle session to make
// room. It never closes a session that holds a claim on a run (its claim
// would end with it), nor one with a request in flight (a client
// listening on its GET stream is not idle): when every session is one of
// those, there is no room.
func (s *Server) roomForHTTPSession() bool {
	s.http.mu.Lock()
	n := len(s.http.m)
	type cand struct {
		h    *httpSession
		idle time.Duration
	}
	var idle []cand
	if n >= maxHTTPSessions {
		for _, h := range s.http.m {
			if d := h.idle(); d > 0 {
				idle = append(idle, cand{h, d})
			}
		}
	}
	s.http.mu.Unlock()
	if n < maxHTTPSessions {
		return true
	}
	slices.SortFunc(idle, func(a, b cand) int { return cmp.Compare(b.idle, a.idle) })
	claimed := s.claimHolders()
	for _, c := range idle {
		if claimed[c.h.sess.handle] {
			continue
		}
		s.log.Info("HTTP session evicted to make room: the longest idle", logSession, c.h.sess.id, "idle", c.idle.Round(time.Second))
		s.http.remove(c.h.sess.id)
		c.h.close()
		return true
	}
	return false
}

// claimHolders are the handles of the sessions that hold a claim on a
// live run.
func (s *Server) claimHolders() map[string]bool {
	out := make(map[string]bool)
	for _, r := range s.runs.Live() {
		if c, ok := r.CurrentClaim(); ok {
			out[c.By.Session] = true
		}
	}
	return out
}

// reapHTTPSessions closes every Streamable HTTP session idle longer than
// the configured time, once a tenth of that time, until ctx ends: clients
// that went away without a DELETE leave no session behind for long.
func (s *Server) reapHTTPSessions(ctx context.Context) {
	idle := s.cfg.HTTPSessionIdle
	t := time.NewTicker(max(idle/10, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.http.mu.Lock()
		var stale []*httpSession
		for _, h := range s.http.m {
			if h.idle() > idle {
				stale = append(stale, h)
			}
		}
		s.http.mu.Unlock()
		for _, h := range stale {
			s.log.Info("HTTP session closed: idle", logSession, h.sess.id, "idle_limit", idle)
			s.http.remove(h.sess.id)
			h.close()
		}
	}
}

// errNoWorkspace says how to name a workspace over HTTP.
var errNoWorkspace = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "no workspace: add ?workspace=/abs/path/of/your/project to the MCP URL, or use a client that offers MCP roots (flyd takes the first)"}

// bindWorkspace gives a session without a workspace the first root the
// client offers (roots/list), once; concurrent requests wait for it.
func (s *Server) bindWorkspace(ctx context.Context, sess *session) error {
	sess.wsMu.Lock()
	defer sess.wsMu.Unlock()
	if sess.ws != nil {
		return nil
	}
	ss := sess.ss.Load()
	if ss == nil {
		return errNoWorkspace
	}
	//lint:ignore SA1019 roots are how a session-ful client names its project
	res, err := ss.ListRoots(ctx, nil)
	if err != nil || len(res.Roots) == 0 {
		return errNoWorkspace
	}
	root, ok := fileuri.ToPath(res.Roots[0].URI)
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("the client's first root %q is not a file:// directory: add ?workspace=/abs/path to the MCP URL", res.Roots[0].URI)}
	}
	w, err := s.ws.acquire(root)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("workspace from the client's roots: %v", err)}
	}
	sess.ws = w
	w.mu.Lock()
	w.sessions[sess] = true
	w.mu.Unlock()
	s.log.Info("session bound to the client's first root", logSession, sess.id, "workspace", w.root)
	s.api.Changed()
	return nil
}
