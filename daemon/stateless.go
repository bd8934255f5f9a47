package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// protocolHeader is the HTTP header with the request's protocol version.
const protocolHeader = "Mcp-Protocol-Version"

// maxClientHeader bounds the X-Fly-Client value.
const maxClientHeader = 256

// requestMeta is what a 2026-07-28 request says of itself in _meta.
type requestMeta struct {
	Version      string              `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo   json.RawMessage     `json:"io.modelcontextprotocol/clientInfo"`
	Capabilities json.RawMessage     `json:"io.modelcontextprotocol/clientCapabilities"`
	Client       *mcp.Implementation `json:"-"` // ClientInfo, decoded by check
}

// metaOf reads a request's _meta; the zero value when it has none.
func metaOf(params json.RawMessage) requestMeta {
	var p struct {
		Meta requestMeta `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta
}

// check reports what the request's _meta lacks, in the words of the
// SDK's own refusal; "" when it is whole. It decodes the client's info.
func (m *requestMeta) check() string {
	if len(m.ClientInfo) > 0 && string(m.ClientInfo) != "null" {
		if json.Unmarshal(m.ClientInfo, &m.Client) != nil {
			return fmt.Sprintf("invalid _meta field %q", mcp.MetaKeyClientInfo)
		}
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(m.Capabilities, &caps) != nil || caps == nil {
		return fmt.Sprintf("missing or invalid _meta field %q", mcp.MetaKeyClientCapabilities)
	}
	return ""
}

// removedMethods are the requests 2026-07-28 dropped: answered 404 with
// -32601 over HTTP, as the transport requires.
var removedMethods = map[string]bool{"initialize": true, "ping": true, "logging/setLevel": true, "resources/subscribe": true, "resources/unsubscribe": true}

// modernBody reports whether a POST without a session is of the
// sessionless era: its header says so, or its one message's _meta does
// (then a missing header is an error the stateless path reports).
func modernBody(r *http.Request, body []byte) bool {
	if mcpserver.IsModern(r.Header.Get(protocolHeader)) {
		return true
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && metaOf(req.Params).Version != ""
}

// rpcError answers a request with a JSON-RPC error and an HTTP status.
func rpcError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string, data any) {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serveStateless serves one 2026-07-28 request: it checks what the
// transport requires, finds or starts the client's fly session, and hands
// the request to the SDK on a connection of its own.
func (s *Server) serveStateless(w http.ResponseWriter, r *http.Request, body []byte) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		http.Error(w, "Bad Request: one JSON-RPC message per POST (MCP 2026-07-28 has no batches): "+err.Error(), http.StatusBadRequest)
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		http.Error(w, "Bad Request: a client sends requests and notifications only", http.StatusBadRequest)
		return
	}
	if !req.IsCall() {
		// Nothing to route it to: a request is cancelled by closing its
		// POST, and there is no session to tell anything else.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	meta := metaOf(req.Params)
	hv := r.Header.Get(protocolHeader)
	switch {
	case hv == "":
		rpcError(w, http.StatusBadRequest, req.ID, mcp.CodeHeaderMismatch, protocolHeader+" header is required for requests carrying "+mcp.MetaKeyProtocolVersion, nil)
		return
	case meta.Version == "":
		rpcError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidParams, "missing or invalid _meta field "+mcp.MetaKeyProtocolVersion, nil)
		return
	case hv != meta.Version:
		rpcError(w, http.StatusBadRequest, req.ID, mcp.CodeHeaderMismatch, fmt.Sprintf("%s header %q does not match request %s %q", protocolHeader, hv, mcp.MetaKeyProtocolVersion, meta.Version), nil)
		return
	case !slices.Contains(mcpserver.ProtocolVersions(), hv):
		rpcError(w, http.StatusBadRequest, req.ID, mcp.CodeUnsupportedProtocolVersion, "unsupported protocol version",
			mcp.UnsupportedProtocolVersionData{Supported: mcpserver.ProtocolVersions(), Requested: hv})
		return
	case removedMethods[req.Method]:
		rpcError(w, http.StatusNotFound, req.ID, jsonrpc.CodeMethodNotFound, fmt.Sprintf("%q is not part of MCP %s", req.Method, hv), nil)
		return
	}
	if why := meta.check(); why != "" {
		rpcError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidParams, why, nil)
		return
	}
	h, status, err := s.statelessSession(r, meta.Client)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	sess := h.sess
	sess.setClient(meta.Client)
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
	r = withSDKVersion(r, hv)
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

// acceptsBoth reports whether an Accept header takes both JSON and an
// event stream, as a Streamable HTTP client must.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
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

// versionContexts caches, per protocol version, a context marked the way
// the SDK's HTTP handler marks a request of that version (see
// sdkVersionContext).
var versionContexts sync.Map // version → context.Context

// withSDKVersion returns r with its protocol version marked in its context
// as the SDK's own handler marks it: the SDK's stateless transport reads
// the version from there to require and check the 2026-07-28 headers. The
// SDK keeps that context key to itself, so the mark is taken from a
// context its handler made, and r's context is layered over it.
func withSDKVersion(r *http.Request, version string) *http.Request {
	v, ok := versionContexts.Load(version)
	if !ok {
		v, _ = versionContexts.LoadOrStore(version, sdkVersionContext(version))
	}
	marked, _ := v.(context.Context)
	if marked == nil {
		return r
	}
	return r.WithContext(layered{Context: r.Context(), under: marked})
}

// sdkVersionContext runs the SDK's stateless handler on a request of
// version that it refuses (no server), keeping the context its handler
// gave the request; nil if it never got that far.
func sdkVersionContext(version string) context.Context {
	var got context.Context
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		got = r.Context() // the last call is with the version marked
		return nil
	}, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	r, err := http.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	if err != nil {
		return nil
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(protocolHeader, version)
	h.ServeHTTP(discard{}, r)
	if got == nil {
		return nil
	}
	return context.WithoutCancel(got)
}

// layered is a context whose values are its own, else those of under.
type layered struct {
	context.Context
	under context.Context
}

func (c layered) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.under.Value(key)
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
