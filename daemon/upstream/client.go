package upstream

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/internal/logkey"
)

// What an upstream sends flyd: its requests for sampling and elicitation,
// which go to the client of the call in flight, and its notifications
// (list changes, resource updates, log messages, progress), which go to
// the sessions they are for.

// clientOptions are the handlers of flyd's client of the upstream.
func (in *instance) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Logger: in.m.log.With("upstream", in.srv.Name),
		// A 2026-07-28 upstream's requests for input go to flyd, which
		// answers them by the calling client's era (see exchange).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			s, ask, call, err := in.caller()
			if err != nil {
				return nil, err
			}
			if ask != nil {
				return asked[*mcp.CreateMessageResult](ask(ctx, req.Params))
			}
			ctx, done := onCall(ctx, call)
			defer done()
			return s.MCP().CreateMessage(ctx, req.Params)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s, ask, call, err := in.caller()
			if err != nil {
				return nil, err
			}
			if ask != nil {
				return asked[*mcp.ElicitResult](ask(ctx, req.Params))
			}
			ctx, done := onCall(ctx, call)
			defer done()
			return s.MCP().Elicit(ctx, req.Params)
		},
		// Refreshed off the connection's goroutine: the lists are requests
		// to the same upstream.
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { in.changed("tools") },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { in.changed("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			in.toUsers("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		},
		ResourceUpdatedHandler:      in.resourceUpdated,
		LoggingMessageHandler:       in.logMessage,
		ProgressNotificationHandler: in.progressed,
	}
}

// resourceUpdated tells the sessions subscribed to the resource.
func (in *instance) resourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	in.mu.Lock()
	var to []Session
	for id := range in.subs[req.Params.URI] {
		if s := in.users[id]; s != nil {
			to = append(to, s)
		}
	}
	in.mu.Unlock()
	for _, s := range to {
		s.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI})
	}
}

// logMessage passes the upstream's log message to every sharing session,
// at the level each set.
func (in *instance) logMessage(ctx context.Context, req *mcp.LoggingMessageRequest) {
	in.mu.Lock()
	users := slices.Collect(maps.Values(in.users))
	in.mu.Unlock()
	p := *req.Params
	if p.Logger == "" {
		p.Logger = in.srv.Name
	}
	for _, s := range users {
		if ss := s.MCP(); ss != nil {
			_ = ss.Log(ctx, &p) // at the level the session set
		}
	}
}

// progressed routes the upstream's progress to the call it belongs to,
// under the caller's own token (see withProgress).
func (in *instance) progressed(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok := fmt.Sprint(req.Params.ProgressToken)
	in.mu.Lock()
	r, ok := in.progress[tok]
	var s Session
	if ok {
		s = in.users[r.session]
	}
	in.mu.Unlock()
	if ok {
		defer in.passedOn(r)
	}
	if !ok || s == nil || (s.MCP() == nil && r.to == nil) {
		in.m.log.Debug("upstream progress for no live call", "upstream", in.srv.Name, "token", tok)
		return
	}
	p := *req.Params
	p.ProgressToken = r.token
	to, nctx := s.MCP(), ctx
	if r.to != nil {
		to, nctx = r.to, r.reqCtx
	}
	if err := to.NotifyProgress(nctx, &p); err != nil {
		in.m.log.Debug("progress not delivered", "upstream", in.srv.Name, "session", s.ID(), logkey.Error, err)
	}
}

// progressRead counts a progress notification the go-sdk has just read
// from the upstream, before its handler passes it on (see withProgress).
func (in *instance) progressRead(params json.RawMessage) {
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	var tok string // flyd's tokens are short strings ("fly-N"): nothing else is decoded
	if json.Unmarshal(params, &p) != nil || len(p.ProgressToken) > 64 || json.Unmarshal(p.ProgressToken, &tok) != nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if r := in.progress[tok]; r != nil {
		if r.pending == 0 {
			r.drained = make(chan struct{})
		}
		r.pending++
	}
}

// passedOn uncounts a progress notification of r once progressed is done
// with it.
func (in *instance) passedOn(r *progressRoute) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.pending == 0 {
		return
	}
	if r.pending--; r.pending == 0 {
		close(r.drained)
		r.drained = nil
	}
}

// countingTransport is the upstream's transport, with its connection's
// progress notifications counted as they are read.
type countingTransport struct {
	mcp.Transport
	in *instance
}

func (t countingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{c, t.in}, nil
}

// countingConn sees every message the go-sdk reads from the upstream, in
// order, on the SDK's one reading goroutine.
type countingConn struct {
	mcp.Connection
	in *instance
}

func (c countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Request); ok && !r.IsCall() && r.Method == "notifications/progress" {
		c.in.progressRead(r.Params)
	}
	return msg, err
}

// toUsers sends one notification to every sharing session.
func (in *instance) toUsers(method string, params any) {
	in.mu.Lock()
	users := slices.Collect(maps.Values(in.users))
	in.mu.Unlock()
	for _, s := range users {
		s.Notify(method, params)
	}
}
