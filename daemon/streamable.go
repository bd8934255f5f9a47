package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP Streamable HTTP at /mcp: each session is the go-sdk's
// StreamableServerTransport connected through serveSession, like a
// WebSocket session, so that it shares workspaces, runs and per-session
// notifications (which go out on the session's GET stream).

const (
	maxHTTPSessions = 256              // live Streamable HTTP sessions
	httpSessionIdle = 30 * time.Minute // one unused this long is closed when room is needed
	headerSessionID = "Mcp-Session-Id"
)

type httpSession struct {
	t    *mcp.StreamableServerTransport
	sess *session

	mu   sync.Mutex
	last time.Time
}

func (h *httpSession) touch() {
	h.mu.Lock()
	h.last = time.Now()
	h.mu.Unlock()
}

func (h *httpSession) idle() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Since(h.last)
}

// httpSessions are the live Streamable HTTP sessions by id.
type httpSessions struct {
	mu sync.Mutex
	m  map[string]*httpSession
}

func (hs *httpSessions) get(id string) *httpSession {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.m[id]
}

func (hs *httpSessions) remove(id string) {
	hs.mu.Lock()
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
		if h == nil {
			http.Error(w, "no such MCP session (flyd restarted, or it was closed): initialize again", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodDelete {
			if ss := h.sess.ss.Load(); ss != nil {
				ss.Close()
			}
			s.http.remove(id)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.touch()
		h.t.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "no "+headerSessionID+": start a session with an initialize POST", http.StatusBadRequest)
		return
	}
	// Only an initialize starts a session. A client trying a newer,
	// sessionless protocol first is told which versions flyd speaks, and
	// falls back.
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(protocolVersions(), v) {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(protocolVersions(), ",")+")", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var first struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &first) != nil || first.Method != "initialize" {
		http.Error(w, "Bad Request: no "+headerSessionID+": start a session with an initialize request", http.StatusBadRequest)
		return
	}
	dir := r.URL.Query().Get("workspace")
	if dir == "" {
		if d, err := url.QueryUnescape(r.Header.Get(wire.HeaderWorkspace)); err == nil {
			dir = d
		}
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
	pr, _ := peerFrom(r.Context())
	sess := &session{id: newID(), ws: ws, peerPID: pr.PID, via: "http", connected: make(chan struct{})}
	h := &httpSession{t: &mcp.StreamableServerTransport{SessionID: sess.id}, sess: sess, last: time.Now()}
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

// roomForHTTPSession closes the longest-idle session when the table is
// full and it has been idle long enough, and reports whether there is room.
func (s *Server) roomForHTTPSession() bool {
	s.http.mu.Lock()
	n := len(s.http.m)
	var oldest *httpSession
	for _, h := range s.http.m {
		if oldest == nil || h.idle() > oldest.idle() {
			oldest = h
		}
	}
	s.http.mu.Unlock()
	if n < maxHTTPSessions {
		return true
	}
	if oldest == nil || oldest.idle() < httpSessionIdle {
		return false
	}
	if ss := oldest.sess.ss.Load(); ss != nil {
		ss.Close()
	}
	s.http.remove(oldest.sess.id)
	return true
}

// needsWorkspace reports whether a method works on the session's
// workspace: all but the handshake, pings, logging and notifications.
func needsWorkspace(method string) bool {
	switch method {
	case "initialize", "ping", "logging/setLevel":
		return false
	}
	return !strings.HasPrefix(method, "notifications/")
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
	u, err := url.Parse(res.Roots[0].URI)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("the client's first root %q is not a file:// directory: add ?workspace=/abs/path to the MCP URL", res.Roots[0].URI)}
	}
	w, err := s.ws.acquire(u.Path)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("workspace from the client's roots: %v", err)}
	}
	sess.ws = w
	w.mu.Lock()
	w.sessions[sess] = true
	w.mu.Unlock()
	s.log.Info("session bound to the client's first root", logSession, sess.id, "workspace", w.root)
	s.changes.bump()
	return nil
}
