package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// flyd's own tools, as an agent sees them in tools/list: few, each said
// once, within toolsBudget. Each has the tags toolfilter's catalog gives
// it, its category and the presets it belongs to, which a session's tool
// filter (flyctl mcp --tools, --disable; ?tools=, ?disable= on
// /mcp) matches. The tools that were
// merged into others keep answering under their old names for a release,
// unlisted.

// toolsBudget is the most flyd's own tools may take in tools/list.
const toolsBudget = 6 << 10

// ownTool is what flyd knows of one of its tools beyond the SDK's.
type ownTool struct {
	tags   []string
	hidden bool // an old name kept working: callable, not listed
}

// ann is a tool's annotations: read-only, or not destructive (what
// changes can be changed back). A tool without them is taken, as the
// spec's defaults say, to be able to destroy: stop, build, create and a
// claim over others' work. (The SDK writes every hint a tool has, false
// ones too: each costs bytes of every tools/list.)
func ann(readOnly bool) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{ReadOnlyHint: readOnly}
	if !readOnly {
		a.DestructiveHint = new(bool)
	}
	return a
}

// addTools registers every tool on srv.
func (s *Server) addTools(srv *mcp.Server) {
	t := tools{s}
	add(s, srv, &mcp.Tool{Name: "flutter_run",
		Description: "Start the app (flutter run), or attach to one an IDE started. Every agent shares the run, its log and errors.",
		Annotations: ann(false)}, t.flutterRun)
	add(s, srv, &mcp.Tool{Name: "flutter_hot_reload",
		Description: "Apply code edits to a running app (restart: true loses state): applied or not, compile errors, new app errors.",
		Annotations: ann(false)}, t.reload)
	add(s, srv, &mcp.Tool{Name: "flutter_stop",
		Description: "Stop a run or build, or detach an attached app (stop_app: true ends it).",
		Annotations: nil}, t.stop)
	add(s, srv, &mcp.Tool{Name: "flutter_claim",
		Description: "Hold a run: others' reloads and stops fail with your note unless forced. release: true ends it.",
		Annotations: nil}, t.claim)
	add(s, srv, &mcp.Tool{Name: "runs_list",
		Description: "Runs and builds here, newest first, with who did what; apps started elsewhere.",
		Annotations: ann(true)}, t.runsList)
	add(s, srv, &mcp.Tool{Name: "flutter_errors",
		Description: "A run's errors (overflows, exceptions), deduplicated, with lib/ lines, newest first, since the last reload.",
		Annotations: ann(true)}, t.flutterErrors)
	add(s, srv, &mcp.Tool{Name: "flutter_inspect",
		Description: "Look inside a running debug app: its widget tree with source lines, or a screenshot.",
		Annotations: ann(true)}, t.inspect)
	add(s, srv, &mcp.Tool{Name: "logs_read",
		Description: "A run's log, newest 16 KB: seq time stream text. Page: before=from_seq, since=next_since. events: true adds flutter's machine events.",
		Annotations: ann(true)}, t.logsRead)
	add(s, srv, &mcp.Tool{Name: "files_find",
		Description: "Workspace files matching a glob (lib/**/*_page.dart; no / means any depth), paged.",
		Annotations: ann(true)}, t.filesFind)
	add(s, srv, &mcp.Tool{Name: "files_grep",
		Description: "Search workspace files for an RE2 regexp, by file, 16 KB a page.",
		Annotations: ann(true)}, t.filesGrep)
	add(s, srv, &mcp.Tool{Name: "files_read",
		Description: "A workspace file's lines, numbered, 16 KB at a time.",
		Annotations: ann(true)}, t.filesRead)
	add(s, srv, &mcp.Tool{Name: "flutter_build",
		Description: "flutter build: the artifact path, or the failing lines.",
		Annotations: nil}, t.build)
	add(s, srv, &mcp.Tool{Name: "flutter_sdk",
		Description: "devices (ids for flutter_run), doctor, or create: a new project in directory (confirm: true).",
		Annotations: nil}, t.sdk)

	// The names these tools had before they were merged.
	alias(s, srv, &mcp.Tool{Name: "flutter_hot_restart", Annotations: ann(false)}, t.hotRestart, "flutter_hot_reload")
	alias(s, srv, &mcp.Tool{Name: "flutter_attach", Annotations: ann(false)}, t.attach, "flutter_run")
	alias(s, srv, &mcp.Tool{Name: "flutter_widget_tree", Annotations: ann(true)}, t.widgetTree, "flutter_inspect")
	alias(s, srv, &mcp.Tool{Name: "flutter_screenshot", Annotations: ann(true)}, t.screenshot, "flutter_inspect")
	alias(s, srv, &mcp.Tool{Name: "flutter_devices", Annotations: ann(true)}, t.devices, "flutter_sdk")
	alias(s, srv, &mcp.Tool{Name: "flutter_doctor", Annotations: ann(true)}, t.doctor, "flutter_sdk")
	alias(s, srv, &mcp.Tool{Name: "flutter_create", Annotations: nil}, t.create, "flutter_sdk")
}

// add registers one of flyd's tools with its tags in toolfilter's
// catalog.
func add[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	tags, ok := toolfilter.TagsOf(t.Name)
	if !ok {
		panic(fmt.Sprintf("tool %s is not in toolfilter.Tools", t.Name)) // a bug: the catalog names every tool
	}
	register(s, srv, t, h, tags)
}

// register registers a tool with tags.
func register[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], tags []string) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", t.Name, err)) // a bug in the params type
	}
	for _, p := range in.Properties {
		// A Go slice or pointer is "null or T" to the inference; a client
		// sends T or leaves the field out.
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
	t.InputSchema = in
	s.own[t.Name] = true
	s.tools[t.Name] = ownTool{tags: tags}
	mcp.AddTool(srv, t, h)
}

// alias registers an old name of the tool of, unlisted, with its tags.
func alias[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], of string) {
	t.Description = "Old name: use " + of + "."
	register(s, srv, t, h, s.tools[of].tags)
	s.tools[t.Name] = ownTool{tags: s.tools[of].tags, hidden: true}
}

// tagsOf returns the tags a session's filter matches a tool by.
func (s *Server) tagsOf(name string) []string {
	if t, ok := s.tools[name]; ok {
		return t.tags
	}
	if s.up != nil {
		if srv := s.up.ServerOf(name); srv != "" {
			return []string{toolfilter.Upstream, srv, toolfilter.All}
		}
	}
	return []string{toolfilter.All}
}

// CheckFilter reports a term of f that names nothing flyd knows: not a
// preset, category, tool, upstream server or glob, and not shaped like a
// tool name (an upstream's, perhaps not listed yet). A typo in a filter
// would otherwise hide tools without a word.
func (s *Server) CheckFilter(f *toolfilter.Filter) error {
	known := map[string]bool{}
	for name, t := range s.tools {
		known[name] = true
		for _, g := range t.tags {
			known[g] = true
		}
	}
	known[toolfilter.Upstream] = true
	if s.up != nil {
		for _, srv := range s.up.Servers() {
			known[srv.Name] = true
		}
	}
	for _, term := range f.Terms() {
		if !known[term] && !toolfilter.IsGlob(term) && !strings.Contains(term, "_") {
			return fmt.Errorf("tool filter: %q is no preset, category, tool or upstream; presets and categories: %s", term, strings.Join(toolfilter.Describe(), "; "))
		}
	}
	return nil
}

// filtered refuses a call to a tool the session's filter leaves out.
func (s *Server) filtered(sess *client, name string) error {
	if ok, why := sess.Tools().Allows(name, s.tagsOf(name)); !ok {
		return fmt.Errorf("tool %q is off for this session: %s; the client's MCP config sets it (flyctl mcp --tools/--disable, or ?tools=/?disable= on /mcp)", name, why)
	}
	return nil
}

// listTools answers tools/list: flyd's own tools, encoded once (the
// go-sdk encodes a JSON schema by reflection, about 3 ms for flyd's
// dozen tools, on every call), then the upstreams', each kept if the
// session's filter lets it through.
func (s *Server) listTools(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p != nil && p.Cursor != "" {
		return next(ctx, method, req)
	}
	own, err := s.ownToolList(ctx, method, req, next)
	if err != nil {
		return nil, err
	}
	sess, err := s.sessionOf(req.GetSession().(*mcp.ServerSession))
	if err != nil {
		return &mcp.ListToolsResult{Tools: own}, nil
	}
	tools := slices.Clone(own)
	if s.up != nil {
		tools = append(tools, s.up.Tools(ctx, sess.Session)...)
	}
	f := sess.Tools()
	if !f.Empty() {
		tools = slices.DeleteFunc(tools, func(t *mcp.Tool) bool {
			ok, _ := f.Allows(t.Name, s.tagsOf(t.Name))
			return !ok
		})
	}
	return &mcp.ListToolsResult{Tools: tools}, nil
}

// ownToolList is flyd's own listed tools, as sent: schemas encoded once,
// no output schemas (results carry their JSON as text and structured
// content alike; the schemas would double the list), old names left out.
func (s *Server) ownToolList(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) ([]*mcp.Tool, error) {
	s.toolsMu.Lock()
	own := s.ownTools
	s.toolsMu.Unlock()
	if own != nil {
		return own, nil
	}
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	l, ok := res.(*mcp.ListToolsResult)
	if !ok || l.NextCursor != "" {
		return nil, fmt.Errorf("flyd's tools do not fit one page of tools/list")
	}
	for _, t := range l.Tools {
		if s.tools[t.Name].hidden {
			continue
		}
		c := *t
		c.InputSchema, c.OutputSchema = upstream.RawSchema(t.InputSchema), nil
		own = append(own, &c)
	}
	s.toolsMu.Lock()
	s.ownTools = own
	s.toolsMu.Unlock()
	return own, nil
}

// refuseFiltered answers a call to a tool the session's filter leaves
// out, with the reason, as a tool error the agent reads; nil lets the
// call through.
func (s *Server) refuseFiltered(req *mcp.CallToolRequest) *mcp.CallToolResult {
	sess, err := s.sessionOf(req.Session)
	if err != nil || req.Params == nil {
		return nil
	}
	if err := s.filtered(sess, req.Params.Name); err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
	}
	return nil
}
