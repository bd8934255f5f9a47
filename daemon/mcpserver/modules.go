package mcpserver

import (
	"context"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/daemon/modules"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The project as an agent reads it first: the overview and its modules,
// in markdown.

// markdownResult is a text/markdown resource.
func markdownResult(uri, text string) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: text}}}
}

// readOverview is fly://project/overview as markdown, with one line per
// module after it.
func (s *Server) readOverview(sess *client, uri string) (*mcp.ReadResourceResult, error) {
	ov, err := sess.ws.Overview()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(ov.Markdown(sess.ws.Root()))
	if g, err := sess.ws.Modules(); err == nil {
		b.WriteString("\n## Modules (" + itoa(len(g.Modules)) + ")\n\nfly://project/modules has their key files and imports; fly://module/{name} one module.\n\n")
		for _, m := range g.Modules {
			b.WriteString("- " + m.Name + " (" + m.Kind + ", " + m.Path + ", " + itoa(m.Files) + " files)\n")
			if b.Len() > 16<<10 {
				b.WriteString("- …\n")
				break
			}
		}
	}
	b.WriteString("\n(JSON: fly://project/overview?format=json)\n")
	return markdownResult(uri, b.String()), nil
}

// readModule serves fly://module/{name}: one module in markdown, or
// -32602 "Module not found: x" with the nearest names.
func (s *Server) readModule(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	name, err := url.PathUnescape(strings.TrimPrefix(uri, "fly://module/"))
	if err != nil || name == "" || len(name) > 256 {
		return nil, invalidParams("%q names no module: fly://module/{name}, a name of fly://project/modules", uri)
	}
	g, err := sess.ws.Modules()
	if err != nil {
		return nil, err
	}
	m := g.Find(name)
	if m == nil {
		msg := "Module not found: " + name
		if near := g.Nearest(name, 5); len(near) > 0 {
			msg += " (did you mean " + strings.Join(near, ", ") + "?)"
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
	return markdownResult(uri, m.Markdown()), nil
}

// completeModule completes the name of fly://module/{name}.
func completeModule(g *modules.Graph, prefix string) []string {
	out := []string{}
	for _, n := range g.Names() {
		if strings.HasPrefix(n, prefix) || strings.HasPrefix(path.Base(n), prefix) {
			out = append(out, n)
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
