package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 over Streamable HTTP: no initialize and no
// Mcp-Session-Id; each POST is one request carrying its protocol version
// and client in _meta, and a subscriptions/listen POST is the client's
// notification stream. Each request gets an SDK session of its own (the
// SDK's stateless transport), bound to a fly session that outlives it, so
// that claims, "who did what" and fly://sessions/current mean what they
// mean on the shim's connection.
//
// What identifies a client: the workspace it names, its tool filter, and
// the X-Fly-Client header if it sends one, else the name and version its
// requests' _meta give. Two windows of one editor on one workspace share a
// fly session unless they send distinct X-Fly-Client values. The session
// ends once it has had no request in flight (an open listen stream is one)
// for HTTPSessionIdle.

// maxClientHeader bounds the X-Fly-Client value.
const maxClientHeader = 256

// serveStateless serves one 2026-07-28 request: it checks what the
// transport requires, finds or starts the client's fly session, and hands
// the request to the SDK on a connection of its own.
func (s *Server) serveStateless(w http.ResponseWriter, r *http.Request, body []byte) {
	req, ok := mcpconn.ParseStateless(w, r, body)
	if !ok {
		return
	}
	h, status, err := s.statelessSession(r, req.Client)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	sess := h.sess
	sess.setClient(req.Client)
	defer h.track(r)()

	// The request's own connection: a write stuck past its deadline
	// closes it, and only while the request is being served (after, the
	// server still has the response to flush).
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	var served atomic.Bool
	abort := func() {
		if c != nil && !served.Load() {
			_ = c.Close()
		}
	}
	// The version goes in the context first: the connection keeps the
	// context it is made with, and the SDK gives a response the HTTP
	// status 2026-07-28 wants for its error from there.
	r = mcpconn.WithSDKVersion(r, req.Version)
	id := statelessConnID(sess.id, h.seq.Add(1))
	tr := &mcp.StreamableServerTransport{SessionID: id, Stateless: true}
	ss, err := s.surface.MCP().Connect(r.Context(), sessionTransport{Transport: tr, sess: sess, timeout: s.cfg.WriteTimeout, log: s.log, abort: abort}, nil)
	if err != nil {
		http.Error(w, "could not serve the request: "+err.Error(), http.StatusInternalServerError)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	tr.ServeHTTP(w, r)
	served.Store(true)
	_ = ss.Close() // ends a listen stream whose client went away
	sess.dropConn(id)
}

// statelessConnID is the SDK session id of one request of the fly
// session id: sessionTable.Of finds the fly session by what precedes the
// dot (fly's ids are hex).
func statelessConnID(id string, n uint64) string {
	return id + "." + strconv.FormatUint(n, 10)
}

// statelessSession finds the fly session of the client that sent r, or
// starts one. On failure it returns the HTTP status to answer with.
func (s *Server) statelessSession(r *http.Request, client *mcp.Implementation) (*httpSession, int, error) {
	dir := r.URL.Query().Get("workspace")
	pr, onSocket := peerFrom(r.Context())
	if dir == "" && onSocket {
		if d, err := url.QueryUnescape(r.Header.Get(wire.HeaderWorkspace)); err == nil {
			dir = d
		}
	}
	if dir != "" {
		dir = filepath.Clean(dir)
	}
	filter, err := s.toolFilter(r)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	who := r.Header.Get(wire.HeaderClient)
	if len(who) > maxClientHeader {
		return nil, http.StatusBadRequest, fmt.Errorf("%s is longer than %d bytes", wire.HeaderClient, maxClientHeader)
	}
	if who == "" && client != nil {
		who = "client " + client.Name + "/" + client.Version
	} else {
		who = "header " + who
	}
	key := strings.Join([]string{dir, filter.String(), who}, "\x00")

	s.http.mu.Lock()
	h := s.http.byClient[key]
	s.http.mu.Unlock()
	if h != nil {
		return h, 0, nil
	}
	if !s.roomForHTTPSession() {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("too many MCP sessions over HTTP")
	}
	var ws *workspace
	if dir != "" {
		if ws, err = s.ws.acquire(dir); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	s.http.mu.Lock()
	defer s.http.mu.Unlock()
	if h := s.http.byClient[key]; h != nil { // started by a request of the same client meanwhile
		if ws != nil {
			s.ws.release(ws)
		}
		return h, 0, nil
	}
	sess := &session{id: newID(), ws: ws, peerPID: pr.PID, tools: filter, via: "http", stateless: true}
	h = &httpSession{sess: sess, key: key, last: time.Now(), conns: map[net.Conn]int{}}
	sess.abort = h.abort
	end := s.openSession(sess)
	h.stop = func() { end(nil) }
	s.http.m[sess.id] = h
	s.http.byClient[key] = h
	s.log.Info("session started", logSession, sess.id, "workspace", sess.root(), "via", "http, 2026-07-28", "peer_pid", pr.PID)
	return h, 0, nil
}
