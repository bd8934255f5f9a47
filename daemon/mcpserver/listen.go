package mcpserver

import (
	"context"

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
		var res mcp.Result
		err = sess.Listen(ctx, ss.ID(), p.Meta[mcp.MetaKeySubscriptionID], agreed, func() error {
			res, err = next(ctx, method, req)
			return err
		})
		return res, err
	}
}
