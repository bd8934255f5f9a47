package daemon

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/endpoint"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 over Streamable HTTP: no initialize and no
// Mcp-Session-Id; each POST is one request carrying its protocol version
// and client in _meta, and a subscriptions/listen POST is the client's
// notification stream. Each request gets an SDK session of its own (the
// SDK's stateless transport), bound to a fly session.
//
// What identifies a client: only what it alone knows. A client that
// sends an X-Fly-Client header (a random value it chose, up to 256
// bytes) has one fly session per value, workspace and tool filter: its
// requests share claims, "who did what" and fly://sessions/current, as on
// the shim's connection, and the session ends once it has had no request
// in flight (an open listen stream is one) for HTTPSessionIdle. The key
// is a hash of those, so that it is bounded whatever the client sends.
//
// A request without the header gets a fly session of its own that ends
// with the request: it cannot claim a run (the claim would end at once),
// and what it did is recorded under that session's handle. clientInfo's
// name and version never merge requests: two windows of one editor send
// the same ones, and anyone can send anyone's, so a session found by them
// would let one act through the other's claim.
//
// Sessions are capped: maxPerClient per X-Fly-Client value and
// maxTransient requests in flight without one, within maxHTTPSessions in
// all. A stateless request never evicts another session; when there is no
// room it is refused with 503.

// Bounds of stateless sessions (see above).
const (
	maxPerClient = 8
	maxTransient = 64
)

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
	if h.key == "" { // a request without X-Fly-Client: its session ends with it
		defer func() {
			s.http.remove(sess.id)
			h.close()
		}()
	}
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
	pr, onSocket := endpoint.PeerFrom(r.Context())
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
	var key, clientKey string
	if who != "" {
		clientKey = hashKey(who)
		key = hashKey(dir, filter.String(), who)
		s.http.mu.Lock()
		h := s.http.byClient[key]
		s.http.mu.Unlock()
		if h != nil {
			return h, 0, nil
		}
	}
	if msg := s.http.statelessRoom(clientKey); msg != "" {
		return nil, http.StatusServiceUnavailable, errors.New(msg)
	}
	var ws *workspace
	if dir != "" {
		if ws, err = s.ws.acquire(dir); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	s.http.mu.Lock()
	defer s.http.mu.Unlock()
	if key != "" {
		if h := s.http.byClient[key]; h != nil { // started by a request of the same client meanwhile
			if ws != nil {
				s.ws.release(ws)
			}
			return h, 0, nil
		}
	}
	sess := &session{id: newID(), ws: ws, peerPID: pr.PID, tools: filter, via: "http", stateless: true, transient: key == ""}
	h := &httpSession{sess: sess, key: key, client: clientKey, last: time.Now(), conns: map[net.Conn]int{}}
	sess.abort = h.abort
	end := s.openSession(sess)
	h.stop = func() { end(nil) }
	s.http.m[sess.id] = h
	if key != "" {
		s.http.byClient[key] = h
	}
	if sess.transient {
		s.log.Debug("session started", logSession, sess.id, "workspace", sess.root(), "via", "http, 2026-07-28, one request", "peer_pid", pr.PID)
		return h, 0, nil
	}
	s.log.Info("session started", logSession, sess.id, "workspace", sess.root(), "via", "http, "+wire.SessionlessRevision, "peer_pid", pr.PID)
	return h, 0, nil
}

// hashKey is a fixed-size key made of parts, whatever their length.
func hashKey(parts ...string) string {
	d := sha256.New()
	for _, p := range parts {
		_, _ = io.WriteString(d, strconv.Itoa(len(p))+":"+p)
	}
	return string(d.Sum(nil))
}

// statelessRoom reports why a new stateless session does not fit, or ""
// if it does: its X-Fly-Client (hashed; "" for none) has maxPerClient
// sessions, or maxTransient requests without one are in flight, or the
// table is full. It never evicts: a stateless client is told to retry.
func (hs *httpSessions) statelessRoom(client string) string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, h := range hs.m {
		if h.sess.stateless && h.client == client {
			n++
		}
	}
	switch {
	case client != "" && n >= maxPerClient:
		return fmt.Sprintf("too many MCP sessions for this %s: %d (one per workspace and tool filter); let some end, or reuse one", wire.HeaderClient, maxPerClient)
	case client == "" && n >= maxTransient:
		return fmt.Sprintf("too many MCP requests without %s in flight: %d; retry, or send %s with a value of your own", wire.HeaderClient, maxTransient, wire.HeaderClient)
	case len(hs.m) >= maxHTTPSessions:
		return fmt.Sprintf("too many MCP sessions over HTTP: %d; retry later", maxHTTPSessions)
	}
	return ""
}
