package mcpconn

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rules of MCP 2026-07-28 over Streamable HTTP that hold before any
// session is involved: no initialize and no Mcp-Session-Id; each POST is
// one request carrying its protocol version, client and capabilities in
// _meta, with headers that must agree.

// ProtocolHeader is the HTTP header with a request's protocol version.
const ProtocolHeader = "Mcp-Protocol-Version"

// StatelessRequest is a 2026-07-28 request that passed the transport's
// checks.
type StatelessRequest struct {
	*jsonrpc.Request
	Version string              // in its header and its _meta alike
	Client  *mcp.Implementation // its _meta's clientInfo; nil when it gives none
}

// requestMeta is what a 2026-07-28 request says of itself in _meta.
type requestMeta struct {
	Version      string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo   json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
}

// metaOf reads a request's _meta; the zero value when it has none.
func metaOf(params json.RawMessage) requestMeta {
	var p struct {
		Meta requestMeta `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta
}

// removedMethods are the requests 2026-07-28 dropped: answered 404 with
// -32601 over HTTP, as the transport requires.
var removedMethods = map[string]bool{"initialize": true, "ping": true, "logging/setLevel": true, "resources/subscribe": true, "resources/unsubscribe": true}

// IsStateless reports whether a POST without a session is of the
// sessionless era: its header says so, or its one message's _meta does
// (then a missing header is an error ParseStateless reports).
func IsStateless(r *http.Request, body []byte) bool {
	if wire.IsSessionless(r.Header.Get(ProtocolHeader)) {
		return true
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && metaOf(req.Params).Version != ""
}

// ParseStateless checks a POST of the sessionless era (body is its body)
// as the transport requires. It returns the request, or false when it
// has answered w itself: with the refusal, or 202 for a notification,
// which has nothing to route it to (a request is cancelled by closing
// its POST).
func ParseStateless(w http.ResponseWriter, r *http.Request, body []byte) (StatelessRequest, bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return StatelessRequest{}, false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return StatelessRequest{}, false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		http.Error(w, "Bad Request: one JSON-RPC message per POST (MCP 2026-07-28 has no batches): "+err.Error(), http.StatusBadRequest)
		return StatelessRequest{}, false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		http.Error(w, "Bad Request: a client sends requests and notifications only", http.StatusBadRequest)
		return StatelessRequest{}, false
	}
	if !req.IsCall() {
		w.WriteHeader(http.StatusAccepted)
		return StatelessRequest{}, false
	}
	refuse := func(status int, code int64, msg string, data any) (StatelessRequest, bool) {
		rpcError(w, status, req.ID, code, msg, data)
		return StatelessRequest{}, false
	}
	meta := metaOf(req.Params)
	hv := r.Header.Get(ProtocolHeader)
	versions := mcp.SupportedProtocolVersions()
	switch {
	case hv == "":
		return refuse(http.StatusBadRequest, mcp.CodeHeaderMismatch, ProtocolHeader+" header is required for requests carrying "+mcp.MetaKeyProtocolVersion, nil)
	case meta.Version == "":
		return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "missing or invalid _meta field "+mcp.MetaKeyProtocolVersion, nil)
	case hv != meta.Version:
		return refuse(http.StatusBadRequest, mcp.CodeHeaderMismatch, fmt.Sprintf("%s header %q does not match request %s %q", ProtocolHeader, hv, mcp.MetaKeyProtocolVersion, meta.Version), nil)
	case !slices.Contains(versions, hv):
		return refuse(http.StatusBadRequest, mcp.CodeUnsupportedProtocolVersion, "unsupported protocol version",
			mcp.UnsupportedProtocolVersionData{Supported: versions, Requested: hv})
	case removedMethods[req.Method]:
		return refuse(http.StatusNotFound, jsonrpc.CodeMethodNotFound, fmt.Sprintf("%q is not part of MCP %s", req.Method, hv), nil)
	}
	// What _meta lacks, in the words of the SDK's own refusal.
	var client *mcp.Implementation
	if len(meta.ClientInfo) > 0 && string(meta.ClientInfo) != "null" && json.Unmarshal(meta.ClientInfo, &client) != nil {
		return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, fmt.Sprintf("invalid _meta field %q", mcp.MetaKeyClientInfo), nil)
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(meta.Capabilities, &caps) != nil || caps == nil {
		return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", mcp.MetaKeyClientCapabilities), nil)
	}
	return StatelessRequest{Request: req, Version: hv, Client: client}, true
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

// versionContexts caches, per protocol version, a context marked the way
// the SDK's HTTP handler marks a request of that version (see
// sdkVersionContext).
var versionContexts sync.Map // version → context.Context

// WithSDKVersion returns r with its protocol version marked in its
// context as the SDK's own HTTP handler marks it: the SDK's stateless
// transport reads the version from there to require and check the
// 2026-07-28 headers, and to give a protocol error its HTTP status. The
// SDK keeps that context key to itself, so the mark is taken from a
// context its handler made, and r's context is layered over it.
func WithSDKVersion(r *http.Request, version string) *http.Request {
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
	r.Header.Set(ProtocolHeader, version)
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
