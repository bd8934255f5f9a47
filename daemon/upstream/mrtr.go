//lint:file-ignore SA1019 sampling, deprecated in 2026-07-28, is still how upstreams ask for completions; flyd relays it

package upstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Multi round-trip requests (MCP 2026-07-28) for an upstream of the
// handshake era. A client of the new era cannot be sent a request: an
// upstream's sampling or elicitation request in the middle of the
// client's tools/call, prompts/get or resources/read goes back to the
// client as an input_required result of that request, and its answer
// comes with the client's retry, which carries the requestState flyd
// gave. Meanwhile the upstream's call stays in flight on a relay, which
// the retry finds by that state. (An upstream of the new era asks in its
// own results, which go to the client as they are: see era.go.)

// relayPrefix starts the requestState of every relay's round.
const relayPrefix = "fly-"

// maxRelays bounds the calls waiting on their clients' answers.
const maxRelays = 256

// askGather is how long a relay waits, after an upstream's first request
// for input, for more of the same round before it answers the client:
// an upstream that asks several things at once asks them together.
const askGather = 20 * time.Millisecond

// relay is a 2026-07-28 client's call in flight upstream.
type relay struct {
	state string // the requestState its client holds
	owner string // who may go on with it: see owner
	caps  *mcp.ClientCapabilities

	asks    chan *inputAsk  // the upstream's requests for input
	outcome chan callResult // the upstream call's end; buffered
	gone    chan struct{}   // closed when the relay is dropped
	stop    context.CancelFunc
	expiry  *time.Timer

	mu   sync.Mutex
	open map[string]*inputAsk // sent to the client, unanswered
	seq  int
}

// inputAsk is one request of the upstream for the client's input.
type inputAsk struct {
	key   string
	req   mcp.InputRequest
	reply chan askReply // buffered
}

type askReply struct {
	res mcp.InputResponse
	err error
}

type callResult struct {
	res mcp.Result
	err error
}

// relays are the calls of a manager waiting on their clients, by state.
type relays struct {
	mu sync.Mutex
	m  map[string]*relay
}

// relayed makes x of a handshake-era upstream for req, a 2026-07-28
// client's request, or goes on with the call its retry names.
func (m *Manager) relayed(ctx context.Context, in *instance, s Session, req ClientRequest, x exchange) (mcp.Result, *pending, error) {
	var r *relay
	if strings.HasPrefix(x.state, relayPrefix) {
		m.relays.mu.Lock()
		r = m.relays.m[x.state]
		m.relays.mu.Unlock()
		if r == nil || r.owner != owner(s) {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is unknown or has expired: make the request again without it"}
		}
		r.answer(x.responses)
	} else {
		// A new request, or the answer to a round the upstream asked in
		// a result, which goes back to it as it came.
		tok, end := in.withProgress(ctx, s, progressToken(x.meta))
		meta := withToken(outMeta(ctx, s, false, x.meta), tok)
		r = m.startRelay(in, s, req, end, func(ctx context.Context, cs *mcp.ClientSession) (mcp.Result, error) {
			return x.send(ctx, cs, meta, x.responses, x.state)
		})
		if r == nil {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many calls wait on their clients' input; try again"}
		}
	}
	res, p, err := m.next(ctx, r)
	return cleanResult(res), p, err
}

// owner is who s counts as for a relay and for an upstream's request for
// input: s itself, or, when s is a session of one request (a 2026-07-28
// client over HTTP that sends no X-Fly-Client, whose retry is another
// such session), the client it says it is. A relay goes on only for a
// request of its owner that holds its requestState (130 random bits
// given to that client alone); an upstream of the handshake era cannot
// say which call its request for input belongs to, so it goes to the
// newest call of the one owner with calls in flight, as it would for a
// session's.
func owner(s Session) string {
	if t, ok := s.(interface {
		Transient() bool
		ClientKey() string
	}); ok && t.Transient() {
		return "client " + t.ClientKey()
	}
	return "session " + s.ID()
}

// startRelay starts the upstream call of a new relay; nil when the table
// is full.
func (m *Manager) startRelay(in *instance, s Session, req ClientRequest, done func(), send func(context.Context, *mcp.ClientSession) (mcp.Result, error)) *relay {
	ctx, stop := context.WithCancel(context.Background())
	r := &relay{state: relayPrefix + rand.Text(), owner: owner(s), caps: req.ClientCapabilities(), asks: make(chan *inputAsk, 8), outcome: make(chan callResult, 1),
		gone: make(chan struct{}), stop: stop, open: map[string]*inputAsk{}}
	m.relays.mu.Lock()
	if m.relays.m == nil {
		m.relays.m = map[string]*relay{}
	}
	if len(m.relays.m) >= maxRelays {
		m.relays.mu.Unlock()
		stop()
		done()
		return nil
	}
	m.relays.m[r.state] = r
	m.relays.mu.Unlock()
	// A client that never comes back costs the call's timeout at most.
	r.expiry = time.AfterFunc(in.srv.Timeout(), func() { m.dropRelay(r) })
	m.wg.Go(func() { // owned by the manager: ends with the call, bounded by its timeout
		var res mcp.Result
		err := in.callAsking(ctx, s, r.ask, func(ctx context.Context, cs *mcp.ClientSession) error {
			var err error
			res, err = send(ctx, cs)
			return err
		})
		done() // the call's progress is passed on before its result
		select {
		case r.outcome <- callResult{res, err}:
		default: // the call failed already (fail)
		}
	})
	return r
}

// dropRelay forgets r and ends its upstream call if still running.
func (m *Manager) dropRelay(r *relay) {
	m.relays.mu.Lock()
	r.mu.Lock()
	state := r.state
	r.mu.Unlock()
	if m.relays.m[state] == r {
		delete(m.relays.m, state)
	}
	m.relays.mu.Unlock()
	r.mu.Lock()
	select {
	case <-r.gone:
	default:
		close(r.gone)
	}
	r.mu.Unlock()
	r.stop()
	r.expiry.Stop()
}

// next waits for what comes next of r: the call's result, or the
// upstream's requests for input, which it returns as a round of the
// client's input. Requests its client left unanswered are asked again at
// once.
func (m *Manager) next(ctx context.Context, r *relay) (mcp.Result, *pending, error) {
	if r.hasOpen() { // its client left some unanswered: ask again
		return nil, m.round(r), nil
	}
	select {
	case o := <-r.outcome:
		m.dropRelay(r)
		return o.res, nil, o.err
	case a := <-r.asks:
		r.hold(a)
	case <-r.gone:
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the request waited too long for its input and was ended: make it again"}
	case <-ctx.Done():
		return nil, nil, ctx.Err() // the relay waits for a retry until it expires
	}
	t := time.NewTimer(askGather)
	defer t.Stop()
	for {
		select {
		case a := <-r.asks:
			r.hold(a)
			continue
		case <-t.C:
		}
		break
	}
	return nil, m.round(r), nil
}

// round is a new round of r's requests for input, under a new
// requestState: each round's state names that round only.
func (m *Manager) round(r *relay) *pending {
	m.relays.mu.Lock()
	if m.relays.m[r.state] == r {
		delete(m.relays.m, r.state)
		r.mu.Lock()
		r.state = relayPrefix + rand.Text()
		r.mu.Unlock()
		m.relays.m[r.state] = r
	}
	m.relays.mu.Unlock()
	return r.pending()
}

// hasOpen reports whether a request of r waits for its client's answer.
func (r *relay) hasOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open) > 0
}

// hold records a request for input as sent to the client.
func (r *relay) hold(a *inputAsk) {
	r.mu.Lock()
	r.open[a.key] = a
	r.mu.Unlock()
}

// pending is the round asking for every open request; nil when none is
// open.
func (r *relay) pending() *pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) == 0 {
		return nil
	}
	reqs := make(mcp.InputRequestMap, len(r.open))
	for k, a := range r.open {
		reqs[k] = a.req
	}
	return &pending{requests: reqs, state: r.state}
}

// answer hands the client's responses to the requests they answer.
func (r *relay) answer(responses mcp.InputResponseMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, res := range responses {
		if a := r.open[k]; a != nil {
			a.reply <- askReply{res: res}
			delete(r.open, k)
		}
	}
}

// ask is what the upstream's request for input waits on: the client's
// answer on its retry. A client that did not declare the capability the
// request needs is not asked: the call fails with -32021.
func (r *relay) ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	if missing := r.missing(req); missing != "" {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{missing: map[string]any{}}})
		err := &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: fmt.Sprintf("the upstream needs %s, which the client did not declare", missing), Data: data}
		r.fail(err)
		return nil, err
	}
	r.mu.Lock()
	r.seq++
	a := &inputAsk{key: fmt.Sprintf("input-%d", r.seq), req: req, reply: make(chan askReply, 1)}
	r.mu.Unlock()
	select {
	case r.asks <- a:
	case <-r.gone:
		return nil, errRelayGone
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case rep := <-a.reply:
		return rep.res, rep.err
	case <-r.gone:
		return nil, errRelayGone
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errRelayGone = errors.New("the client's call ended before it answered")

// missing names the client capability req needs and the client did not
// declare; "" when it did.
func (r *relay) missing(req mcp.InputRequest) string {
	c := r.caps
	switch req.(type) {
	case *mcp.ElicitParams:
		if c == nil || c.Elicitation == nil {
			return "elicitation"
		}
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		if c == nil || c.Sampling == nil {
			return "sampling"
		}
	}
	return ""
}

// fail ends the client's call with err, whatever the upstream does next.
func (r *relay) fail(err error) {
	select {
	case r.outcome <- callResult{err: err}:
	default:
	}
}

// asked turns a client's answer into the result the upstream's request
// wants. A sampling answer arrives in its with-tools form.
func asked[T mcp.InputResponse](res mcp.InputResponse, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if w, ok := res.(*mcp.CreateMessageWithToolsResult); ok {
		if len(w.Content) != 1 {
			return zero, fmt.Errorf("the client answered the sampling request with %d content blocks; the upstream takes one", len(w.Content))
		}
		res = &mcp.CreateMessageResult{Meta: w.Meta, Content: w.Content[0], Model: w.Model, Role: w.Role, StopReason: w.StopReason}
	}
	t, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("the client answered with %T, not %T", res, zero)
	}
	return t, nil
}
