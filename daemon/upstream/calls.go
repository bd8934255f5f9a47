package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls to an instance on behalf of a session: the calls in flight (whose
// client the upstream's requests for input go to), their progress, and
// subscriptions.

// progressGrace is how long progress is still routed after its call;
// progressDrain how long a call's result waits for the progress the
// upstream sent before it to be passed on.
const (
	progressGrace = 2 * time.Second
	progressDrain = time.Second
)

type progressRoute struct {
	session string
	token   any
	// The request the call came in, when known (see WithRequest): its
	// progress goes there, on the request's own stream.
	to     *mcp.ServerSession
	reqCtx context.Context
	// pending counts the progress read from the upstream but not yet
	// passed on (see countingConn); drained is closed when it is back
	// to 0 (nil while it is 0). Both under the instance's mu.
	pending int
	drained chan struct{}
}

var callSeq atomic.Uint64

// call runs fn on the live connection on behalf of s, bounded by the
// upstream's timeout. While it runs, s is the session that sampling and
// elicitation requests from the upstream go to. A connection lost
// mid-call turns into an error naming the upstream and quoting its
// stderr.
func (in *instance) call(ctx context.Context, s Session, fn func(context.Context, *mcp.ClientSession) error) error {
	return in.callAsking(ctx, s, nil, fn)
}

// callRec is a call in flight: whose, and, for a 2026-07-28 client's,
// how the upstream's requests for input reach it (see mrtr.go).
type callRec struct {
	session string
	owner   string          // see owner
	ask     askFunc         // nil: ask the session's client directly
	ctx     context.Context // the call's, which carries the client's request
}

// askFunc asks a client for input in the middle of its call.
type askFunc func(context.Context, mcp.InputRequest) (mcp.InputResponse, error)

// callAsking is call, with the upstream's requests for input going to
// ask when it is not nil.
func (in *instance) callAsking(ctx context.Context, s Session, ask askFunc, fn func(context.Context, *mcp.ClientSession) error) error {
	ctx, cancel := context.WithTimeout(ctx, in.srv.Timeout())
	defer cancel()
	cs, proc, err := in.session(ctx)
	if err != nil {
		return err
	}
	id := callSeq.Add(1)
	in.mu.Lock()
	in.calls[id] = callRec{session: s.ID(), owner: owner(s), ask: ask, ctx: ctx}
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.calls, id)
		in.mu.Unlock()
	}()
	err = fn(ctx, cs)
	var answer *jsonrpc.Error
	switch {
	case err == nil, errors.As(err, &answer):
		return err // the upstream's own answer
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("upstream %s did not answer within %s (its timeout_sec): %w", in.srv.Name, in.srv.Timeout(), err)
	case ctx.Err() != nil:
		return err
	}
	// The connection failed: if the process is dying, say so, with why.
	select {
	case <-proc.Done():
		return in.describe(proc, fmt.Errorf("exited during the call (%w)", err))
	case <-time.After(2 * time.Second):
		return fmt.Errorf("upstream %s: %w", in.srv.Name, err)
	}
}

// caller is the session of the only call in flight, if there is exactly
// one: the one a sampling or elicitation request belongs to; with how to
// ask its client when that is not a request of flyd's own (ask nil), and
// the call's context.
func (in *instance) caller() (Session, askFunc, context.Context, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ids := map[string]bool{}
	var rec callRec
	var newest uint64
	for id, c := range in.calls {
		ids[c.owner] = true
		if id >= newest { // the session's latest call: an earlier one its client gave up on may linger
			rec, newest = c, id
		}
	}
	if len(ids) != 1 {
		return nil, nil, nil, fmt.Errorf("flyd shares %s between sessions and cannot tell which one this request is for (%d have calls in flight)", in.srv.Name, len(ids))
	}
	if rec.ask != nil { // a relay's: it asks through the relay, whose client may be between requests
		return in.users[rec.session], rec.ask, rec.ctx, nil
	}
	if s := in.users[rec.session]; s != nil && s.MCP() != nil {
		return s, nil, rec.ctx, nil
	}
	return nil, nil, nil, errors.New("the calling session has gone")
}

// onCall returns a context for asking the client of a call whose context
// is call, in the middle of the upstream's request whose context is ctx:
// it carries call's values (the client's request, on whose stream the SDK
// sends a request that belongs to it: over Streamable HTTP, not the GET
// stream, which the client may not have opened) and ends with either.
func onCall(ctx, call context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(call)
	stop := context.AfterFunc(ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

// withProgress routes the upstream's progress for one call back to the
// caller's token, and returns the token to send upstream and a function
// that ends the route. The go-sdk reads the upstream's messages in order
// but hands notifications to their handler on another goroutine, so the
// call's result can reach flyd before the progress the upstream sent
// ahead of it has been passed on: the end function waits (at most
// progressDrain) until it has, so that the client gets every progress
// notification before the result, as the upstream sent them.
func (in *instance) withProgress(ctx context.Context, s Session, token any) (any, func()) {
	if token == nil {
		return nil, func() {}
	}
	ours := fmt.Sprintf("fly-%d", callSeq.Add(1))
	route := &progressRoute{session: s.ID(), token: token}
	if req := requestOf(ctx); req != nil {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			route.to, route.reqCtx = ss, context.WithoutCancel(ctx)
		}
	}
	in.mu.Lock()
	in.progress[ours] = route
	in.mu.Unlock()
	return ours, func() {
		in.mu.Lock()
		drained := route.drained
		in.mu.Unlock()
		if drained != nil {
			t := time.NewTimer(progressDrain)
			select {
			case <-drained:
			case <-t.C: // a notification the SDK refused never reaches progressed
			}
			t.Stop()
		}
		// Progress the upstream sends after its result still goes to the
		// caller for a moment.
		time.AfterFunc(progressGrace, func() {
			in.mu.Lock()
			delete(in.progress, ours)
			in.mu.Unlock()
		})
	}
}

// subscribe adds s to the subscribers of uri, subscribing upstream only
// for the first one.
func (in *instance) subscribe(ctx context.Context, s Session, uri string) error {
	in.mu.Lock()
	first := len(in.subs[uri]) == 0
	in.mu.Unlock()
	if first {
		err := in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
			return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		})
		if err != nil {
			return err
		}
	}
	in.mu.Lock()
	if in.subs[uri] == nil {
		in.subs[uri] = map[string]bool{}
	}
	in.subs[uri][s.ID()] = true
	in.mu.Unlock()
	return nil
}

// unsubscribe removes s; the upstream is unsubscribed when s was the last.
func (in *instance) unsubscribe(ctx context.Context, s Session, uri string) error {
	in.mu.Lock()
	who := in.subs[uri]
	if !who[s.ID()] {
		in.mu.Unlock()
		return nil
	}
	delete(who, s.ID())
	last := len(who) == 0
	if last {
		delete(in.subs, uri)
	}
	in.mu.Unlock()
	if !last {
		return nil
	}
	return in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
}
