package mcpconn

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/fly-dev/fly/internal/safetext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a client says about itself is shown in flyctl status, the
// dashboard, fly://sessions/*, the store and flyd's log. It is bounded
// where it enters (initialize), before the SDK keeps it.
const (
	MaxClientName    = 128
	MaxClientVersion = 64
	maxClientText    = 256  // title, description, website
	maxClientExtras  = 4096 // encoded experimental capabilities, extensions, _meta
	MaxLogValue      = 256  // a client's string in flyd's log
)

// BoundText returns s without invalid UTF-8 and without the runes that
// must not reach a reader as themselves (safetext.Unsafe: controls,
// format characters such as bidi overrides and zero-width spaces, line
// and paragraph separators), cut to at most n bytes on a rune boundary
// (with "…" when cut).
func BoundText(s string, n int) string {
	clean := func(s string) bool {
		for _, r := range s {
			if r == utf8.RuneError || safetext.Unsafe(r) {
				return false
			}
		}
		return true
	}
	if len(s) <= n && clean(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || safetext.Unsafe(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > n-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// BoundInitialize bounds, in place, what a decoded initialize carries
// that the SDK keeps for the session's life (for transports that do not
// pass through BoundInitializeMessage). Kept strings are copies.
func BoundInitialize(p *mcp.InitializeParams) {
	if p == nil {
		return
	}
	p.ProtocolVersion = strings.Clone(BoundText(p.ProtocolVersion, MaxClientVersion))
	if c := p.ClientInfo; c != nil {
		p.ClientInfo = boundImplementation(c)
	}
	if c := p.Capabilities; c != nil {
		if tooLarge(c.Experimental) {
			c.Experimental = nil
		}
		if tooLarge(c.Extensions) {
			c.Extensions = nil
		}
	}
	if tooLarge(p.Meta) {
		p.Meta = nil
	}
}

// boundImplementation is a bounded copy of what a client says it is.
func boundImplementation(c *mcp.Implementation) *mcp.Implementation {
	return &mcp.Implementation{
		Name:        strings.Clone(BoundText(c.Name, MaxClientName)),
		Version:     strings.Clone(BoundText(c.Version, MaxClientVersion)),
		Title:       strings.Clone(BoundText(c.Title, maxClientText)),
		Description: strings.Clone(BoundText(c.Description, maxClientText)),
		WebsiteURL:  strings.Clone(BoundText(c.WebsiteURL, maxClientText)),
		// Icons are never shown.
	}
}

// BoundInitializeMessage rewrites an initialize request as it enters,
// before the SDK sees it: the SDK keeps the request for the session's
// life, and its JSON decoder makes strings that share the request's
// buffer, so a bound applied after it decoded the message would leave
// the client's megabytes in memory all the same. The rewrite keeps the
// params' known members as sent (capabilities byte for byte, but for
// experimental capabilities and extensions too large to be honest), cuts
// clientInfo, and drops the rest. Anything else is returned as it is.
//
// A request of MCP 2026-07-28 says what its client is in every request's
// _meta, and the SDK keeps the first one's for the connection's life:
// a large clientInfo there is cut the same way.
func BoundInitializeMessage(msg jsonrpc.Message) jsonrpc.Message {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || len(req.Params) == 0 {
		return msg
	}
	if req.Method != "initialize" {
		return boundMetaClient(req)
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(req.Params, &in) != nil {
		return msg // the SDK answers with the error
	}
	out := map[string]json.RawMessage{}
	if v, ok := in["protocolVersion"]; ok && len(v) <= MaxClientVersion {
		out["protocolVersion"] = v
	}
	if v, ok := in["clientInfo"]; ok {
		var c mcp.Implementation
		if json.Unmarshal(v, &c) != nil {
			return msg
		}
		out["clientInfo"], _ = json.Marshal(boundImplementation(&c))
	}
	if v, ok := in["capabilities"]; ok {
		var caps map[string]json.RawMessage
		if json.Unmarshal(v, &caps) == nil {
			for _, k := range []string{"experimental", "extensions"} {
				if len(caps[k]) > maxClientExtras {
					delete(caps, k)
				}
			}
			v, _ = json.Marshal(caps)
		}
		out["capabilities"] = v
	}
	if v, ok := in["_meta"]; ok && len(v) <= maxClientExtras {
		out["_meta"] = v
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return msg
	}
	return &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: raw}
}

// boundMetaClient cuts a large clientInfo in a request's _meta. Requests
// whose params are small enough not to matter are returned as they are,
// undecoded.
func boundMetaClient(req *jsonrpc.Request) jsonrpc.Message {
	if len(req.Params) <= maxClientExtras || !bytes.Contains(req.Params, []byte(mcp.MetaKeyClientInfo)) {
		return req
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil {
		return req
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil || len(meta[mcp.MetaKeyClientInfo]) <= maxClientExtras {
		return req
	}
	var c mcp.Implementation
	if json.Unmarshal(meta[mcp.MetaKeyClientInfo], &c) != nil {
		return req
	}
	meta[mcp.MetaKeyClientInfo], _ = json.Marshal(boundImplementation(&c))
	params["_meta"], _ = json.Marshal(meta)
	raw, err := json.Marshal(params)
	if err != nil {
		return req
	}
	return &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: raw, Extra: req.Extra}
}

func tooLarge(v any) bool {
	b, err := json.Marshal(v)
	return err != nil || len(b) > maxClientExtras
}
