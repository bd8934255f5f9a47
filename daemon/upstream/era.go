//lint:file-ignore SA1019 roots and sampling, deprecated in 2026-07-28, are still how upstreams ask for input; flyd relays them

package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The eras of MCP, as flyd meets them on both sides of an upstream call.
//
// flyd offers each upstream the newest revision it speaks (2026-07-28):
// the SDK asks server/discover first, and an upstream of the handshake
// era answers it with an error, whereupon the SDK falls back to
// initialize at 2025-11-25. An upstream that dies of the question
// instead (some servers end the session on any request before
// initialize) is started again at once in the handshake era.
//
// Then each call a client makes of an upstream is one of four:
//   - both of 2026-07-28: the upstream's input_required results, their
//     keys and requestState, go to the client as they are, and its retry
//     goes back as it is; the upstream sees the client's own capabilities;
//   - a handshake-era client, a 2026-07-28 upstream: flyd answers the
//     upstream's requests for input as that era's server-to-client
//     requests were answered (roots with the workspace, sampling and
//     elicitation by asking the client) and sends the call again with the
//     answers;
//   - a 2026-07-28 client, a handshake-era upstream: the upstream's
//     sampling and elicitation requests become input_required results of
//     the client's call (a relay: mrtr.go);
//   - both of the handshake era: requests go to the client as requests.
//
// An upstream of the handshake era that asks for roots is answered by
// flyd with the workspace root in either case: it asks outside any call,
// and what it is told holds for every session that shares it.

// legacyVersion is the newest revision of the handshake era: what an
// upstream that does not answer server/discover is spoken to in.
func legacyVersion() string {
	v := ""
	for _, p := range mcp.SupportedProtocolVersions() {
		if !wire.IsSessionless(p) && p > v {
			v = p
		}
	}
	return v
}

// offer is the revision flyd offers the upstream on its next start.
func (in *instance) offer() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.srv.Protocol != "":
		return in.srv.Protocol
	case in.legacy:
		return legacyVersion()
	}
	return wire.SessionlessRevision
}

// errRetryLegacy ends a start at 2026-07-28 that failed before the
// upstream answered: the next start, at once, is in the handshake era.
var errRetryLegacy = errors.New("no answer to server/discover: trying the handshake era")

// modernConn reports whether cs speaks the stateless era.
func modernConn(cs *mcp.ClientSession) bool {
	r := cs.InitializeResult()
	return r != nil && wire.IsSessionless(r.ProtocolVersion)
}

// ClientRequest is what flyd knows of the client's request that led to
// an upstream call: its session, era and capabilities, per request in
// 2026-07-28. The SDK's *mcp.ServerRequest values are clientRequests.
type ClientRequest interface {
	GetSession() mcp.Session
	ProtocolVersion() string
	ClientCapabilities() *mcp.ClientCapabilities
}

// requestKey keys the client's request in a context.
type requestKey struct{}

// WithRequest marks ctx with req, the client's request that an upstream
// call serves: what the upstream says of the call (progress, requests
// for input) goes back the way req's era wants, on req's own stream over
// stateless HTTP, and the upstream sees req's capabilities.
func WithRequest(ctx context.Context, req ClientRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

func requestOf(ctx context.Context) ClientRequest {
	req, _ := ctx.Value(requestKey{}).(ClientRequest)
	return req
}

// modernRequest returns the client's request ctx carries when its client
// speaks 2026-07-28, else nil.
func modernRequest(ctx context.Context) ClientRequest {
	if req := requestOf(ctx); req != nil && wire.IsSessionless(req.ProtocolVersion()) {
		return req
	}
	return nil
}

// metaPrefix marks the protocol's own _meta keys: a client's describe its
// request to flyd, not flyd's to the upstream.
const metaPrefix = "io.modelcontextprotocol/"

// outMeta is the _meta of a request flyd sends an upstream on s's
// behalf: the client's own keys but the protocol's and its progress
// token (see withProgress), and the capabilities the client has through
// flyd. A 2026-07-28 upstream takes them as the request's; to one of the
// handshake era, which took flyd's at initialize, they are a hint that
// SDKs of both eras read. A handshake-era client can answer roots (flyd
// does) and what it declared; a 2026-07-28 client what it declared. To a
// 2026-07-28 upstream, a handshake-era client also takes every log level,
// as flyd passes each session what its own level lets through.
func outMeta(ctx context.Context, s Session, modernUp bool, meta mcp.Meta) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range meta {
		if !strings.HasPrefix(k, metaPrefix) && k != "progressToken" {
			out[k] = v
		}
	}
	if req := modernRequest(ctx); req != nil {
		c := req.ClientCapabilities()
		out[mcp.MetaKeyClientCapabilities] = capsMeta(c, c != nil && c.RootsV2 != nil || !modernUp)
	} else {
		var c *mcp.ClientCapabilities
		if ss := s.MCP(); ss != nil && ss.InitializeParams() != nil {
			c = ss.InitializeParams().Capabilities
		}
		out[mcp.MetaKeyClientCapabilities] = capsMeta(c, true)
		if modernUp {
			out[mcp.MetaKeyLogLevel] = "debug"
		}
	}
	return out
}

// capsMeta is the clientCapabilities _meta of a request upstream: the
// input the upstream may ask the client for (roots when roots is set).
func capsMeta(c *mcp.ClientCapabilities, roots bool) map[string]any {
	m := map[string]any{}
	if roots {
		m["roots"] = map[string]any{}
	}
	if c != nil && c.Sampling != nil {
		m["sampling"] = c.Sampling
	}
	if c != nil && c.Elicitation != nil {
		m["elicitation"] = c.Elicitation
	}
	return m
}

// An exchange is one tools/call, prompts/get or resources/read of a
// client, through which an upstream may ask for input.
type exchange struct {
	meta      mcp.Meta             // the client's _meta
	responses mcp.InputResponseMap // its answers, on a 2026-07-28 retry
	state     string               // and the requestState they answer
	// send makes the request upstream with the _meta, answers and state
	// given.
	send func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (mcp.Result, error)
}

// pending is a round of requests for a 2026-07-28 client's input: what
// it is asked, and the requestState its retry must carry.
type pending struct {
	requests mcp.InputRequestMap
	state    string
}

// exchange makes x of in for s, in whichever of the four ways the eras
// of s's request and of the upstream call for (see above). A 2026-07-28
// client may get a pending round instead of a result.
func (m *Manager) exchange(ctx context.Context, in *instance, s Session, x exchange) (mcp.Result, *pending, error) {
	if req := modernRequest(ctx); req != nil {
		sctx, cancel := context.WithTimeout(ctx, in.srv.Timeout())
		cs, _, err := in.session(sctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if !modernConn(cs) {
			return m.relayed(ctx, in, s, req, x)
		}
	}
	tok, end := in.withProgress(ctx, s, progressToken(x.meta))
	defer end()
	var res mcp.Result
	err := in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
		modernUp := modernConn(cs)
		meta := withToken(outMeta(ctx, s, modernUp, x.meta), tok)
		var err error
		if modernRequest(ctx) == nil {
			res, err = in.settle(ctx, cs, s, meta, x)
			return err
		}
		// Both of one era: a 2026-07-28 client's answers and state go
		// upstream as they came, and so does what the upstream asks next.
		res, err = x.send(ctx, cs, meta, x.responses, x.state)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return cleanResult(res), nil, nil
}

// progressToken is the progress token of a request's _meta, if any.
func progressToken(meta mcp.Meta) any { return meta["progressToken"] }

// withToken returns meta with the progress token tok, if any.
func withToken(meta mcp.Meta, tok any) mcp.Meta {
	if tok == nil {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta["progressToken"] = tok
	return meta
}

// maxRounds bounds the rounds of input one call of a handshake-era
// client may take, and maxBusy the rounds in which the upstream asked for
// nothing (it is busy, and asks to be called again), as the SDK's own
// client does.
const (
	maxRounds = 10
	maxBusy   = 3
)

// settle makes x for a handshake-era client: each round of the
// upstream's requests for input in its results (a 2026-07-28 upstream's,
// or one that an SDK of both eras put in a result of the handshake era)
// is answered, and the request is sent again with the answers, until a
// result comes.
func (in *instance) settle(ctx context.Context, cs *mcp.ClientSession, s Session, meta mcp.Meta, x exchange) (mcp.Result, error) {
	var responses mcp.InputResponseMap
	state, busy := "", 0
	for round := 1; ; round++ {
		res, err := x.send(ctx, cs, meta, responses, state)
		if err != nil {
			return nil, err
		}
		requests, next, ok := inputOf(res)
		if !ok {
			return res, nil
		}
		if round >= maxRounds {
			return nil, fmt.Errorf("upstream %s asked for input %d times in one call: flyd gives up", in.srv.Name, round)
		}
		if len(requests) == 0 {
			if busy++; busy >= maxBusy {
				return nil, fmt.Errorf("upstream %s is busy: it asked to be called again %d times; try later", in.srv.Name, busy)
			}
			t := time.NewTimer(time.Duration(busy) * 100 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		if responses, err = in.fulfil(ctx, s, requests); err != nil {
			return nil, err
		}
		state = next
	}
}

// inputOf returns the requests for input of a result that asks for it:
// input_required, or, in the handshake era, which has no resultType,
// one with inputRequests (the go-sdk's compatibility layer asks the
// client one round itself, and returns the next).
func inputOf(res mcp.Result) (mcp.InputRequestMap, string, bool) {
	var requests mcp.InputRequestMap
	var state string
	var needs bool
	switch r := res.(type) {
	case *mcp.CallToolResult:
		requests, state, needs = r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.GetPromptResult:
		requests, state, needs = r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.ReadResourceResult:
		requests, state, needs = r.InputRequests, r.RequestState, r.NeedsInput()
	}
	return requests, state, needs || requests != nil
}

// fulfil answers a 2026-07-28 upstream's requests for input on behalf of
// s, a handshake-era client, as that era did: flyd gives the roots;
// sampling and elicitation go to the client as requests, one at a time.
func (in *instance) fulfil(ctx context.Context, s Session, requests mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(requests))
	for _, k := range slices.Sorted(maps.Keys(requests)) {
		var res mcp.InputResponse
		var err error
		ss := s.MCP()
		if _, roots := requests[k].(*mcp.ListRootsParams); !roots && ss == nil {
			return nil, errors.New("the calling session has gone")
		}
		switch p := requests[k].(type) {
		case *mcp.ListRootsParams:
			res = in.rootsResult()
		case *mcp.ElicitParams:
			res, err = ss.Elicit(ctx, p)
		case *mcp.CreateMessageParams:
			res, err = ss.CreateMessage(ctx, p)
		case *mcp.CreateMessageWithToolsParams:
			res, err = ss.CreateMessageWithTools(ctx, p)
		default:
			err = fmt.Errorf("flyd cannot answer a request for input of type %T", p)
		}
		if err != nil {
			return nil, fmt.Errorf("upstream %s asked for input (%s): %w", in.srv.Name, k, err)
		}
		out[k] = res
	}
	return out, nil
}

// rootsResult is what flyd answers an upstream's roots/list with: the
// roots of the workspaces that share it.
func (in *instance) rootsResult() *mcp.ListRootsResult {
	in.mu.Lock()
	defer in.mu.Unlock()
	res := &mcp.ListRootsResult{Roots: []*mcp.Root{}}
	for _, r := range slices.Sorted(maps.Keys(in.roots)) {
		res.Roots = append(res.Roots, rootOf(r))
	}
	return res
}

// result is an SDK call's answer as an mcp.Result: nil, not a typed nil,
// with an error.
func result[R mcp.Result](r R, err error) (mcp.Result, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// cleanResult drops the protocol's _meta keys from an upstream's result
// (its serverInfo): flyd answers the client, and says who it is itself.
func cleanResult(res mcp.Result) mcp.Result {
	if res == nil {
		return res
	}
	m := res.GetMeta()
	for k := range m {
		if strings.HasPrefix(k, metaPrefix) {
			delete(m, k)
		}
	}
	return res
}
