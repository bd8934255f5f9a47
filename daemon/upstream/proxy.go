package upstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// maxName is the longest tool or prompt name flyd gives out: several
// model APIs refuse longer ones.
const maxName = 64

// exposedName is an upstream tool's or prompt's name as sessions see it:
// prefix_name, within maxName characters of [a-zA-Z0-9_-]. A name cut to
// fit keeps a hash of the whole, so that two long names stay apart.
func exposedName(prefix, name string) string {
	var b strings.Builder
	if prefix != "" { // "prefix": "" exposes names as they are
		b.WriteString(prefix)
		b.WriteByte('_')
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) <= maxName {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s_%08x", s[:maxName-9], h.Sum32())
}

// owner finds the server whose prefix name carries, and s's instance of
// it: else the server whose names go unprefixed, for a name that is not
// flyd's own.
func (m *Manager) owner(s Session, name string) (*instance, bool, error) {
	if srv, ok := m.serverOf(name); ok {
		in, err := m.instance(srv, s)
		return in, true, err
	}
	return nil, false, nil
}

// serverOf is the server name belongs to by its prefix, else the one
// whose names go unprefixed (at most one: see mcpconfig.Upstreams).
func (m *Manager) serverOf(name string) (mcpconfig.Server, bool) {
	servers := m.Servers()
	for _, srv := range servers {
		if p := srv.ToolPrefix(); p != "" && strings.HasPrefix(name, p+"_") {
			return srv, true
		}
	}
	if m.cfg.Reserved(name) {
		return mcpconfig.Server{}, false
	}
	for _, srv := range servers {
		if srv.ToolPrefix() == "" {
			return srv, true
		}
	}
	return mcpconfig.Server{}, false
}

// ServerOf returns the name of the upstream server whose prefix the tool
// name carries (or whose names go unprefixed), "" for none.
func (m *Manager) ServerOf(name string) string {
	srv, _ := m.serverOf(name)
	return srv.Name
}

// Tools returns the upstream tools s sees, in config order, renamed. An
// upstream that cannot answer is left out (and logged): flyd's own tools
// never wait on it for long. Names flyd uses itself, or that an earlier
// upstream gave, are left out too.
func (m *Manager) Tools(ctx context.Context, s Session) []*mcp.Tool {
	var out []*mcp.Tool
	seen := map[string]string{}
	m.eachLists(ctx, s, "tools", func(srv mcpconfig.Server, l lists) {
		for _, t := range l.Tools {
			n := exposedName(srv.ToolPrefix(), t.Name)
			if m.cfg.Reserved(n) || seen[n] != "" {
				m.log.Warn("upstream tool left out: its name is taken", "upstream", srv.Name, "tool", t.Name, "name", n, "taken_by", seen[n])
				continue
			}
			seen[n] = srv.Name
			c := *t
			c.Name = n
			out = append(out, &c)
		}
	})
	return out
}

// eachLists calls fn with the lists of every upstream s shares, in
// config order. They are asked together, and none for longer than
// listWait: one that cannot answer by then (still starting, with nothing
// cached) is logged and left out, and its lists are announced with
// list_changed when they arrive.
func (m *Manager) eachLists(ctx context.Context, s Session, what string, fn func(mcpconfig.Server, lists)) {
	servers := m.Servers()
	type answer struct {
		l   lists
		err error
	}
	answers := make([]answer, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		in, err := m.instance(srv, s)
		if err != nil {
			answers[i].err = err
			continue
		}
		wg.Go(func() { // owned by eachLists: waited for below, bounded by listWait
			answers[i].l, answers[i].err = in.snapshot(ctx, listWait)
		})
	}
	wg.Wait()
	for i, srv := range servers {
		if err := answers[i].err; err != nil {
			m.log.Warn("upstream "+what+" left out", "upstream", srv.Name, logkey.Error, err)
			continue
		}
		fn(srv, answers[i].l)
	}
}

// listWait is how long a list call waits for an upstream that has no
// lists yet: list calls answer from what is known, soon.
const listWait = 2 * time.Second

// CallTool calls an upstream tool for s; handled is false when name
// belongs to no upstream. Progress goes back to s alone; cancelling ctx
// (the client's notifications/cancelled) cancels the upstream call.
func (m *Manager) CallTool(ctx context.Context, s Session, p *mcp.CallToolParamsRaw) (res *mcp.CallToolResult, handled bool, err error) {
	in, ok, err := m.owner(s, p.Name)
	if !ok || err != nil {
		return nil, ok, err
	}
	orig := ""
	err = in.find(ctx, func(l lists) bool {
		for _, t := range l.Tools {
			if exposedName(in.srv.ToolPrefix(), t.Name) == p.Name {
				orig = t.Name
			}
		}
		return orig != ""
	})
	if err != nil {
		return nil, true, err
	}
	if orig == "" {
		return nil, false, nil
	}
	r, asked, err := m.exchange(ctx, in, s, exchange{meta: p.Meta, responses: p.InputResponses, state: p.RequestState,
		send: func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (mcp.Result, error) {
			params := &mcp.CallToolParams{Meta: meta, Name: orig, InputResponses: responses, RequestState: state}
			if len(p.Arguments) > 0 {
				params.Arguments = p.Arguments
			}
			return result(cs.CallTool(ctx, params))
		}})
	if asked != nil {
		return &mcp.CallToolResult{InputRequests: asked.requests, RequestState: asked.state}, true, nil
	}
	res, _ = r.(*mcp.CallToolResult)
	return res, true, err
}

// Prompts returns the upstream prompts s sees, renamed like tools.
func (m *Manager) Prompts(ctx context.Context, s Session) []*mcp.Prompt {
	var out []*mcp.Prompt
	seen := map[string]bool{}
	m.eachLists(ctx, s, "prompts", func(srv mcpconfig.Server, l lists) {
		for _, p := range l.Prompts {
			n := exposedName(srv.ToolPrefix(), p.Name)
			if m.cfg.Reserved(n) || seen[n] {
				continue
			}
			seen[n] = true
			c := *p
			c.Name = n
			out = append(out, &c)
		}
	})
	return out
}

// promptOwner maps an exposed prompt name to its upstream and name.
func (m *Manager) promptOwner(ctx context.Context, s Session, name string) (*instance, string, error) {
	in, ok, err := m.owner(s, name)
	if !ok || err != nil {
		return nil, "", err
	}
	orig := ""
	err = in.find(ctx, func(l lists) bool {
		for _, p := range l.Prompts {
			if exposedName(in.srv.ToolPrefix(), p.Name) == name {
				orig = p.Name
			}
		}
		return orig != ""
	})
	if err != nil || orig == "" {
		return nil, "", err
	}
	return in, orig, nil
}

// GetPrompt forwards prompts/get; handled is false for a name no
// upstream gave.
func (m *Manager) GetPrompt(ctx context.Context, s Session, p *mcp.GetPromptParams) (res *mcp.GetPromptResult, handled bool, err error) {
	in, orig, err := m.promptOwner(ctx, s, p.Name)
	if in == nil || err != nil {
		return nil, err != nil, err
	}
	r, asked, err := m.exchange(ctx, in, s, exchange{meta: p.Meta, responses: p.InputResponses, state: p.RequestState,
		send: func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (mcp.Result, error) {
			return result(cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: meta, Name: orig, Arguments: p.Arguments, InputResponses: responses, RequestState: state}))
		}})
	if asked != nil {
		return &mcp.GetPromptResult{InputRequests: asked.requests, RequestState: asked.state}, true, nil
	}
	res, _ = r.(*mcp.GetPromptResult)
	return res, true, err
}

// Templates returns the upstream resource templates s sees, unchanged.
func (m *Manager) Templates(ctx context.Context, s Session) []*mcp.ResourceTemplate {
	var out []*mcp.ResourceTemplate
	m.eachLists(ctx, s, "templates", func(_ mcpconfig.Server, l lists) {
		out = append(out, l.Templates...)
	})
	return out
}

// The resources/list cursor of the upstreams' part: which upstream, and
// its own cursor.
type resCursor struct {
	Server string `json:"s"`
	Cursor string `json:"c,omitempty"`
}

// FirstCursor is the cursor of the first upstream page, or "" when there
// are no upstreams.
func (m *Manager) FirstCursor() string {
	ss := m.Servers()
	if len(ss) == 0 {
		return ""
	}
	return encodeCursor(resCursor{Server: ss[0].Name})
}

func encodeCursor(c resCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// IsCursor reports whether c is one of ListResources' cursors.
func IsCursor(c string) bool {
	_, ok := decodeCursor(c)
	return ok
}

func decodeCursor(c string) (resCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	var rc resCursor
	if err != nil || json.Unmarshal(b, &rc) != nil || rc.Server == "" {
		return resCursor{}, false
	}
	return rc, true
}

// ListResources returns one page of the upstreams' resources, from
// cursor on, and the cursor of the next page ("" after the last). Each
// URI is remembered as its upstream's, for reads and subscriptions.
func (m *Manager) ListResources(ctx context.Context, s Session, cursor string) ([]*mcp.Resource, string, error) {
	rc, ok := decodeCursor(cursor)
	if !ok {
		return nil, "", fmt.Errorf("invalid cursor %q: pass back the nextCursor of the previous page", cursor)
	}
	servers := m.Servers()
	i := slices.IndexFunc(servers, func(srv mcpconfig.Server) bool { return srv.Name == rc.Server })
	if i < 0 {
		return nil, "", nil // that upstream is gone: the list ends
	}
	cursor = rc.Cursor
	// Empty pages are skipped, but only so many: an upstream cannot keep
	// flyd paging forever.
	for range maxEmptyPages {
		if i >= len(servers) {
			break
		}
		srv := servers[i]
		in, err := m.instance(srv, s)
		if err != nil {
			return nil, "", err
		}
		var res *mcp.ListResourcesResult
		err = in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
			if c := cs.InitializeResult().Capabilities; c == nil || c.Resources == nil {
				res = &mcp.ListResourcesResult{}
				return nil
			}
			res, err = cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			return err
		})
		if err != nil {
			m.log.Warn("upstream resources left out", "upstream", srv.Name, logkey.Error, err)
			res = &mcp.ListResourcesResult{}
		}
		m.own(srv.Name, res.Resources)
		next := ""
		switch {
		case res.NextCursor != "":
			next = encodeCursor(resCursor{Server: srv.Name, Cursor: res.NextCursor})
		case i+1 < len(servers):
			next = encodeCursor(resCursor{Server: servers[i+1].Name})
		}
		if len(res.Resources) > 0 || next == "" {
			return res.Resources, next, nil
		}
		if res.NextCursor != "" {
			cursor = res.NextCursor // the same upstream's next page
		} else {
			i, cursor = i+1, ""
		}
	}
	return nil, "", nil
}

// maxEmptyPages bounds the empty upstream pages one resources/list skips.
const maxEmptyPages = 16

// own records which upstream listed each URI: the first one in config
// order keeps it, and a second claim is logged once.
func (m *Manager) own(server string, rs []*mcp.Resource) {
	order := map[string]int{}
	for i, s := range m.Servers() {
		order[s.Name] = i
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rs {
		have, ok := m.owners[r.URI]
		switch {
		case !ok || have == server:
			m.owners[r.URI] = server
		case order[server] < order[have]:
			m.owners[r.URI] = server
			fallthrough
		default:
			if !m.twice[r.URI] {
				m.twice[r.URI] = true
				m.log.Warn("two upstreams list one URI: the first in config order gets it", "uri", r.URI, "upstreams", have+","+server)
			}
		}
	}
}

// route finds the upstream of uri: the one that listed it, else the
// first whose template matches, else the first that declares resources.
func (m *Manager) route(ctx context.Context, s Session, uri string) (*instance, error) {
	m.mu.Lock()
	name := m.owners[uri]
	m.mu.Unlock()
	servers := m.Servers()
	if name == "" {
		for _, srv := range servers {
			in, err := m.instance(srv, s)
			if err != nil {
				return nil, err
			}
			l, err := in.snapshot(ctx, listWait)
			if err != nil {
				continue
			}
			for _, t := range l.Templates {
				if tm, err := uritemplate.New(t.URITemplate); err == nil && tm.Match(uri) != nil {
					return in, nil
				}
			}
		}
		if len(servers) > 0 {
			name = servers[0].Name // never listed, no template: the first may still know it
		}
	}
	for _, srv := range servers {
		if srv.Name == name {
			return m.instance(srv, s)
		}
	}
	return nil, nil
}

// ReadResource forwards resources/read of a URI that is not flyd's;
// handled is false when no upstream can have it.
func (m *Manager) ReadResource(ctx context.Context, s Session, p *mcp.ReadResourceParams) (res *mcp.ReadResourceResult, handled bool, err error) {
	in, err := m.route(ctx, s, p.URI)
	if in == nil || err != nil {
		return nil, err != nil, err
	}
	r, asked, err := m.exchange(ctx, in, s, exchange{meta: p.Meta, responses: p.InputResponses, state: p.RequestState,
		send: func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, responses mcp.InputResponseMap, state string) (mcp.Result, error) {
			return result(cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: meta, URI: p.URI, InputResponses: responses, RequestState: state}))
		}})
	if asked != nil {
		return &mcp.ReadResourceResult{InputRequests: asked.requests, RequestState: asked.state}, true, nil
	}
	res, _ = r.(*mcp.ReadResourceResult)
	return res, true, err
}

// Subscribe subscribes s to an upstream URI: one upstream subscription
// however many sessions share it.
func (m *Manager) Subscribe(ctx context.Context, s Session, uri string) (handled bool, err error) {
	in, err := m.route(ctx, s, uri)
	if in == nil || err != nil {
		return err != nil, err
	}
	return true, in.subscribe(ctx, s, uri)
}

// Unsubscribe removes s's subscription; the upstream's goes with the
// last one.
func (m *Manager) Unsubscribe(ctx context.Context, s Session, uri string) (handled bool, err error) {
	in, err := m.route(ctx, s, uri)
	if in == nil || err != nil {
		return err != nil, err
	}
	return true, in.unsubscribe(ctx, s, uri)
}

// Complete forwards completion/complete for an upstream prompt or
// template; handled is false for anything else.
func (m *Manager) Complete(ctx context.Context, s Session, p *mcp.CompleteParams) (res *mcp.CompleteResult, handled bool, err error) {
	if p == nil || p.Ref == nil {
		return nil, false, nil
	}
	var in *instance
	q := *p
	ref := *p.Ref
	q.Ref = &ref
	switch ref.Type {
	case "ref/prompt":
		var orig string
		if in, orig, err = m.promptOwner(ctx, s, ref.Name); in == nil || err != nil {
			return nil, err != nil, err
		}
		ref.Name = orig
	case "ref/resource":
		for _, srv := range m.Servers() {
			c, err := m.instance(srv, s)
			if err != nil {
				return nil, true, err
			}
			l, _ := c.snapshot(ctx, listWait)
			for _, t := range l.Templates {
				if t.URITemplate == ref.URI {
					in = c
				}
			}
			if in != nil {
				break
			}
		}
		if in == nil {
			return nil, false, nil
		}
	default:
		return nil, false, nil
	}
	err = in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
		q.Meta = outMeta(ctx, s, modernConn(cs), p.Meta)
		res, err = cs.Complete(ctx, &q)
		return err
	})
	return res, true, err
}
