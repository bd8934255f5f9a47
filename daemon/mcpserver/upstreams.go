package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addPrompt registers a prompt of flyd's own.
func (s *Server) addPrompt(srv *mcp.Server, p *mcp.Prompt, h mcp.PromptHandler) {
	s.own[p.Name] = true
	srv.AddPrompt(p, h)
}

// proxyUpstream answers the methods that upstreams take part in, and
// reports whether it did; the SDK's own handlers answer the rest.
func (s *Server) proxyUpstream(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, bool, error) {
	if s.up == nil || len(s.up.Servers()) == 0 {
		return nil, false, nil
	}
	res, ok, err := s.proxy(ctx, method, req, next)
	// An upstream's JSON-RPC error reaches the client as the upstream gave
	// it (its code, message and data), not wrapped in the SDK's words.
	var je *jsonrpc.Error
	if err != nil && errors.As(err, &je) {
		err = je
	}
	return res, ok, err
}

func (s *Server) proxy(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, bool, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	sess, err := s.sessionOf(ss)
	if err != nil {
		return nil, false, nil
	}
	if r, ok := req.(upstream.ClientRequest); ok {
		// What the upstream says of the call goes back as req's era
		// wants, and it sees req's capabilities.
		ctx = upstream.WithRequest(ctx, r)
	}
	switch method {
	case "tools/call":
		p := req.(*mcp.CallToolRequest).Params
		if s.own[p.Name] {
			return nil, false, nil
		}
		res, ok, err := s.up.CallTool(ctx, sess.Session, p)
		if ok {
			sess.ToolCalled()
		}
		return res, ok, err
	case "prompts/list":
		res, err := next(ctx, method, req)
		if l, ok := res.(*mcp.ListPromptsResult); ok && err == nil && l.NextCursor == "" {
			l.Prompts = append(l.Prompts, s.up.Prompts(ctx, sess.Session)...)
		}
		return res, true, err
	case "prompts/get":
		p := req.(*mcp.GetPromptRequest).Params
		if s.own[p.Name] {
			return nil, false, nil
		}
		res, ok, err := s.up.GetPrompt(ctx, sess.Session, p)
		return res, ok, err
	case "resources/templates/list":
		res, err := next(ctx, method, req)
		if l, ok := res.(*mcp.ListResourceTemplatesResult); ok && err == nil && l.NextCursor == "" {
			l.ResourceTemplates = append(l.ResourceTemplates, s.up.Templates(ctx, sess.Session)...)
		}
		return res, true, err
	case "resources/read":
		p := req.(*mcp.ReadResourceRequest).Params
		if flydURI(p.URI) {
			return nil, false, nil
		}
		res, ok, err := s.up.ReadResource(ctx, sess.Session, p)
		return res, ok, err
	case "completion/complete":
		res, ok, err := s.up.Complete(ctx, sess.Session, req.(*mcp.CompleteRequest).Params)
		return res, ok, err
	}
	return nil, false, nil
}

// flydURI reports whether flyd itself serves uri.
func flydURI(uri string) bool {
	for _, p := range []string{workspaceScheme + ":", "logs:", "fly:"} {
		if strings.HasPrefix(uri, p) {
			return true
		}
	}
	return false
}

// listUpstreamResources serves a resources/list page of the upstreams'
// part, after flyd's own.
func (s *Server) listUpstreamResources(ctx context.Context, sess *client, cursor string) (*mcp.ListResourcesResult, error) {
	rs, next, err := s.up.ListResources(ctx, sess.Session, cursor)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	if rs == nil {
		rs = []*mcp.Resource{}
	}
	return &mcp.ListResourcesResult{Resources: rs, NextCursor: next}, nil
}
