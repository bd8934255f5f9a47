package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fly-dev/fly/daemon/localapi"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a tool of flyd's own and remembers its name, so that
// no upstream tool can shadow it.
func addTool[In, Out any](own map[string]bool, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	own[t.Name] = true
	mcp.AddTool(srv, t, h)
}

// addPrompt registers a prompt of flyd's own.
func (s *Server) addPrompt(srv *mcp.Server, p *mcp.Prompt, h mcp.PromptHandler) {
	s.own[p.Name] = true
	srv.AddPrompt(p, h)
}

// startUpstreams creates the upstream manager over db and runs its
// config watcher. The returned function stops every upstream and waits.
func (s *Server) startUpstreams(db *store.DB) (stop func()) {
	path := s.cfg.Upstreams
	if path == "" {
		path = s.cfg.Paths.Upstreams()
	}
	if path == "-" {
		path = ""
	}
	s.up = upstream.New(upstream.Config{
		Path:     path,
		Start:    s.startUpstream,
		Cache:    db,
		Linger:   s.cfg.Linger,
		Reserved: func(name string) bool { return s.own[name] },
		Changed:  s.api.Changed,
		Log:      s.log.With("component", "upstream"),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := s.up.Run(ctx); err != nil {
			s.log.Warn("upstreams config watcher stopped", logErr, err)
		}
	}()
	return func() {
		cancel()
		<-done
		s.up.Close()
	}
}

// startUpstream runs an upstream's command as a run of the engine: its
// own process group, its stderr a persisted log (logs://upstream/{id}),
// killed at flyd's stop and after a crash like any run.
func (s *Server) startUpstream(ctx context.Context, srv mcpconfig.Server, root string, env map[string]string) (upstream.Process, error) {
	path, err := lookPathIn(srv.Command, env["PATH"])
	if err != nil {
		return nil, err
	}
	r, err := s.runs.Start(ctx, runs.Spec{Kind: store.KindUpstream, Root: root, Env: env, Command: path, Name: srv.Command, Args: srv.Args})
	if err != nil {
		return nil, err
	}
	return upstreamProc{r}, nil
}

// lookPathIn finds a bare command on the session's PATH (the editor's,
// where people installed dart and npx), else on flyd's.
func lookPathIn(command, pathEnv string) (string, error) {
	if strings.Contains(command, "/") || pathEnv == "" {
		return exec.LookPath(command)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(command)
	if err != nil {
		return "", errors.New(command + " is not on the PATH of the session or of flyd; give its absolute path in upstreams.json")
	}
	return p, nil
}

// upstreamProc is a run of the engine seen as an upstream process.
type upstreamProc struct{ r *runs.Run }

func (p upstreamProc) ID() string                             { return p.r.ID() }
func (p upstreamProc) PID() int                               { return p.r.Record().PID }
func (p upstreamProc) Stdio() (io.WriteCloser, io.ReadCloser) { return p.r.Stdio() }
func (p upstreamProc) Done() <-chan struct{}                  { return p.r.Done() }
func (p upstreamProc) Tail(n int) []string                    { return p.r.Tail(n) }
func (p upstreamProc) Stop(ctx context.Context) error         { return p.r.Stop(ctx) }

// proxyUpstream answers the methods that upstreams take part in, and
// reports whether it did; the SDK's own handlers answer the rest.
func (s *Server) proxyUpstream(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, bool, error) {
	if s.up == nil || len(s.up.Servers()) == 0 {
		return nil, false, nil
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	sess, err := s.sessionOf(ss)
	if err != nil {
		return nil, false, nil
	}
	switch method {
	case "tools/call":
		p := req.(*mcp.CallToolRequest).Params
		if s.own[p.Name] {
			return nil, false, nil
		}
		res, ok, err := s.up.CallTool(ctx, sess, p)
		if ok {
			sess.toolsCalled.Add(1)
		}
		return res, ok, err
	case "prompts/list":
		res, err := next(ctx, method, req)
		if l, ok := res.(*mcp.ListPromptsResult); ok && err == nil && l.NextCursor == "" {
			l.Prompts = append(l.Prompts, s.up.Prompts(ctx, sess)...)
		}
		return res, true, err
	case "prompts/get":
		p := req.(*mcp.GetPromptRequest).Params
		if s.own[p.Name] {
			return nil, false, nil
		}
		res, ok, err := s.up.GetPrompt(ctx, sess, p)
		return res, ok, err
	case "resources/templates/list":
		res, err := next(ctx, method, req)
		if l, ok := res.(*mcp.ListResourceTemplatesResult); ok && err == nil && l.NextCursor == "" {
			l.ResourceTemplates = append(l.ResourceTemplates, s.up.Templates(ctx, sess)...)
		}
		return res, true, err
	case "resources/read":
		p := req.(*mcp.ReadResourceRequest).Params
		if flydURI(p.URI) {
			return nil, false, nil
		}
		res, ok, err := s.up.ReadResource(ctx, sess, p)
		return res, ok, err
	case "completion/complete":
		res, ok, err := s.up.Complete(ctx, sess, req.(*mcp.CompleteRequest).Params)
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
func (s *Server) listUpstreamResources(ctx context.Context, sess *session, cursor string) (*mcp.ListResourcesResult, error) {
	rs, next, err := s.up.ListResources(ctx, sess, cursor)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	if rs == nil {
		rs = []*mcp.Resource{}
	}
	return &mcp.ListResourcesResult{Resources: rs, NextCursor: next}, nil
}

// listTools answers tools/list: flyd's own tools, encoded once (the
// go-sdk encodes a JSON schema by reflection, about 3 ms for flyd's
// dozen tools, on every call), then the upstreams' tools.
func (s *Server) listTools(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p != nil && p.Cursor != "" {
		return next(ctx, method, req)
	}
	s.toolsMu.Lock()
	own := s.ownTools
	s.toolsMu.Unlock()
	if own == nil {
		res, err := next(ctx, method, req)
		l, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok || l.NextCursor != "" {
			return res, err
		}
		for _, t := range l.Tools {
			c := *t
			c.InputSchema, c.OutputSchema = upstream.RawSchema(t.InputSchema), upstream.RawSchema(t.OutputSchema)
			own = append(own, &c)
		}
		s.toolsMu.Lock()
		s.ownTools = own
		s.toolsMu.Unlock()
	}
	tools := slices.Clone(own)
	if s.up != nil {
		if sess, err := s.sessionOf(req.GetSession().(*mcp.ServerSession)); err == nil {
			tools = append(tools, s.up.Tools(ctx, sess)...)
		}
	}
	return &mcp.ListToolsResult{Tools: tools}, nil
}

// restartUpstream restarts the instances of the named upstream.
func (s *Server) restartUpstream(name string) (int, error) {
	if s.up == nil {
		return 0, localapi.ErrUnavailable
	}
	return s.up.Restart(name)
}
