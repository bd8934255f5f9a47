package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 2026-07-28 client gets notifications only on a subscriptions/listen
// stream, and only those it asked for there. The SDK answers the listen
// (capabilities, the resource subscriptions through flyd's subscribe
// handler, the acknowledgement, holding the stream open); flyd sends its
// notifications itself, per session, so it learns of each stream from its
// acknowledgement going out.

// methodListenAck is the notification that opens a listen stream.
const methodListenAck = "notifications/subscriptions/acknowledged"

// A listen stream lasts as long as its client wants, and over HTTP each
// holds a connection: 8,192 of them once filled the TCP listener's cap,
// and every other HTTP client and the dashboard were refused. So streams
// are counted from the request that opens one to its end, per session
// (MaxSessionListens) and over HTTP in all (MaxListens, below the
// connection cap), and one past either is refused at once with why.

// capListens refuses a subscriptions/listen beyond the caps, and counts
// the others while they are open.
func (s *Server) capListens(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "subscriptions/listen" {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		sess, err := s.sessionOf(ss)
		if err != nil {
			return next(ctx, method, req)
		}
		handle, overHTTP := sess.Handle(), sess.Info().Via == "http"
		s.mu.Lock()
		var refusal string
		switch {
		case s.listens[handle] >= s.cfg.MaxSessionListens:
			refusal = fmt.Sprintf("this session has %d subscriptions/listen streams open, the most it may: close one first (one stream can carry every subscription)", s.cfg.MaxSessionListens)
		case overHTTP && s.httpListens >= s.cfg.MaxListens:
			refusal = fmt.Sprintf("flyd has %d subscriptions/listen streams open over HTTP, the most it keeps: try again later", s.cfg.MaxListens)
		default:
			s.listens[handle]++
			if overHTTP {
				s.httpListens++
			}
		}
		s.mu.Unlock()
		if refusal != "" {
			s.log.Debug("listen stream refused", "session", handle, "reason", refusal)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: refusal}
		}
		defer func() {
			s.mu.Lock()
			if s.listens[handle]--; s.listens[handle] <= 0 {
				delete(s.listens, handle)
			}
			if overHTTP {
				s.httpListens--
			}
			s.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}

// trackListens hands each listen stream to its session with the sending
// of its acknowledgement, which the session orders with its
// notifications: none reaches the stream before the acknowledgement, and
// none is missed after it. The stream lasts as long as the listen
// request's context, which is the one the acknowledgement is sent with.
func (s *Server) trackListens(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodListenAck {
			return next(ctx, method, req)
		}
		p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if !ok || ss == nil {
			return next(ctx, method, req)
		}
		sess, err := s.sessionOf(ss)
		if err != nil {
			return next(ctx, method, req)
		}
		agreed := p.Notifications
		agreed.ResourceSubscriptions = make([]string, 0, len(p.Notifications.ResourceSubscriptions))
		for _, uri := range p.Notifications.ResourceSubscriptions {
			if key, kerr := s.subscriptionKey(uri); kerr == nil {
				uri = key // the form flyd's notifications name it in
			}
			agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, uri)
		}
		if s.up != nil && (agreed.ToolsListChanged || agreed.PromptsListChanged) {
			s.up.Attend(sess.Session) // so that their list changes reach it
		}
		var res mcp.Result
		err = sess.Listen(ctx, ss.ID(), p.Meta[mcp.MetaKeySubscriptionID], agreed, func() error {
			res, err = next(ctx, method, req)
			return err
		})
		return res, err
	}
}

// completeResults marks the tool, prompt and read results flyd builds
// itself or takes from an upstream "complete" for a 2026-07-28 client,
// whose schema requires resultType on them. The SDK marks those its own
// handlers return, and keeps the field to itself; flyd answers most of
// these methods before the SDK's handlers, so it marks its results by
// copying them into a value the SDK's decoder marked.
//
// A resource not found is -32602 in 2026-07-28 (SEP-2164), where the
// handshake era had -32002: a modern client gets the new code.
func (s *Server) completeResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if !modernRequest(req) {
			return unmarked(res), err
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == codeResourceNotFound {
			e := *je
			e.Code = jsonrpc.CodeInvalidParams
			return nil, &e
		}
		if err != nil || res == nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if r.InputRequests != nil { // an upstream's request for input (see upstream's mrtr.go)
				return markedComplete(r, inputRequiredCall), nil
			}
			if !r.NeedsInput() {
				return markedComplete(r, completeCall), nil
			}
		case *mcp.GetPromptResult:
			if r.InputRequests != nil {
				return markedComplete(r, inputRequiredPrompt), nil
			}
			if !r.NeedsInput() {
				return markedComplete(r, completePrompt), nil
			}
		case *mcp.ReadResourceResult:
			if r.InputRequests != nil {
				return markedComplete(r, inputRequiredRead), nil
			}
			if !r.NeedsInput() {
				return markedComplete(r, completeRead), nil
			}
		}
		return res, err
	}
}

// unmarked returns a result for a client of the handshake era, which has
// no resultType: a 2026-07-28 upstream's results carry one.
func unmarked(res mcp.Result) mcp.Result {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			return markedComplete(r, mcp.CallToolResult{})
		}
	case *mcp.GetPromptResult:
		if r != nil {
			return markedComplete(r, mcp.GetPromptResult{})
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			return markedComplete(r, mcp.ReadResourceResult{})
		}
	}
	return res
}

// modernRequest reports whether req is of a 2026-07-28 session.
func modernRequest(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && wire.IsSessionless(p.ProtocolVersion)
}

// Values marked "complete" by the SDK's own decoder.
var (
	completeCall   = decodedComplete[mcp.CallToolResult]()
	completePrompt = decodedComplete[mcp.GetPromptResult]()
	completeRead   = decodedComplete[mcp.ReadResourceResult]()

	inputRequiredCall   = decoded[mcp.CallToolResult](`{"resultType":"input_required"}`)
	inputRequiredPrompt = decoded[mcp.GetPromptResult](`{"resultType":"input_required"}`)
	inputRequiredRead   = decoded[mcp.ReadResourceResult](`{"resultType":"input_required"}`)
)

func decodedComplete[T any]() T { return decoded[T](`{"resultType":"complete"}`) }

func decoded[T any](js string) T {
	var v T
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		panic(err) // the SDK's own type: a change of it shows at start
	}
	return v
}

// markedComplete returns a copy of r that has r's exported fields and
// marked's unexported ones (its resultType, none for a zero marked).
func markedComplete[T any](r *T, marked T) *T {
	out := marked
	src, dst := reflect.ValueOf(r).Elem(), reflect.ValueOf(&out).Elem()
	for i := range dst.NumField() {
		if f := dst.Field(i); f.CanSet() {
			f.Set(src.Field(i))
		}
	}
	return &out
}
