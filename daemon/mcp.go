package daemon

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/fly-dev/fly/daemon/overview"
	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Fixed resources, listed first on the first page of resources/list.
const (
	uriOverview        = "fly://project/overview"
	uriSessionsCurrent = "fly://sessions/current"
	uriSessionsRecent  = "fly://sessions/recent"
)

// Log attribute keys.
const (
	logCID     = "cid"
	logSession = "session"
	logMethod  = "method"
	logTool    = "tool"
	logAttrURI = "uri"
	logElapsed = "elapsed_ms"
	logErr     = "error"
)

const instructions = `flyd is shared by every client on this machine: files, running apps and their logs are the same for all of them.
Files: workspace:///<path> resources (resources/list is paged; append ?start=N&length=M to read part of a large file); subscribe to be told of changes. fly://project/overview summarises the Flutter project.
Search: files_find {glob} lists matching files, files_grep {pattern} searches their contents; both answer from a warm index in milliseconds.
Apps: flutter_run starts the app and returns run_id and log_uri; after editing code call flutter_hot_reload (or flutter_hot_restart) with that run_id; flutter_stop ends it. runs_list shows runs other clients started.
Logs: logs_read {run_id} returns the newest lines within about 16 KB (page back with before, follow with since=next_since); logs://run/{id} is the same log as a resource, and subscribing to it tells you when it grows.
Builds: flutter_build waits for the build and returns the artifact path or the failing lines.`

// protocolVersions are the MCP versions flyd negotiates: the session-ful
// ones. The shim replays a client's initialize after a daemon restart, and
// subscriptions are per session; both assume the initialize handshake.
func protocolVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026" })
}

// newMCPServer builds the one mcp.Server that every session connects to.
func (s *Server) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "flyd", Title: "fly", Version: wire.Version}, &mcp.ServerOptions{
		Instructions:              instructions,
		Logger:                    s.log.With("component", "mcp"),
		PageSize:                  s.cfg.PageSize,
		SubscribeHandler:          s.subscribe,
		CompletionHandler:         s.complete,
		UnsubscribeHandler:        s.unsubscribe,
		SupportedProtocolVersions: protocolVersions(),
		Capabilities: &mcp.ServerCapabilities{
			Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
			//lint:ignore SA1019 the session-ful versions flyd serves have logging; upstreams use it
			Logging: &mcp.LoggingCapabilities{}, // upstreams' log messages, at each session's level
		},
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "workspace-file",
		Title:       "Workspace file",
		URITemplate: "workspace:///{+path}",
		Description: "A file of the session's workspace, by path relative to the root. Add ?start=N&length=M to read a byte range; _meta gives total, start and length in bytes.",
	}, s.readWorkspace)
	for _, r := range s.fixedResources() {
		srv.AddResource(r, s.readFixed)
	}
	for kind, what := range map[string]string{"run": "a flutter run", "build": "a flutter build", "upstream": "a shared upstream MCP server (its stderr)"} {
		srv.AddResourceTemplate(&mcp.ResourceTemplate{
			Name: "log-" + kind, Title: "Log of a " + kind, MIMEType: "text/plain", URITemplate: "logs://" + kind + "/{id}",
			Description: "The log of " + what + ": one line per entry (seq, time, stream, text). Add ?since=SEQ, ?tail=N or ?start=&length=; _meta gives first_seq, last_seq and total.",
		}, s.readLog)
	}
	s.addTools(srv)
	s.addPrompts(srv)
	srv.AddReceivingMiddleware(s.logRequests, s.perSession)
	return srv
}

func (s *Server) fixedResources() []*mcp.Resource {
	return []*mcp.Resource{
		{URI: uriOverview, Name: "project-overview", Title: "Project overview", MIMEType: "application/json",
			Description: "The Flutter/Dart project of this workspace as JSON: name, version, SDK constraints, dependencies, platforms, entry points, tests, nested packages."},
		{URI: uriSessionsCurrent, Name: "session-current", Title: "This session", MIMEType: "application/json",
			Description: "This MCP session: client name and version, since when, files read, tools called."},
		{URI: uriSessionsRecent, Name: "sessions-recent", Title: "Recent sessions", MIMEType: "application/json",
			Description: "The sessions of this workspace, connected and recently ended, newest first."},
	}
}

// sessionOf finds flyd's session behind an SDK session.
func (s *Server) sessionOf(ss *mcp.ServerSession) (*session, error) {
	if ss != nil {
		s.mu.Lock()
		sess := s.sessions[ss.ID()]
		s.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
	}
	return nil, fmt.Errorf("no flyd session for this connection")
}

var requestSeq atomic.Uint64

// logRequests logs every request: debug for reads, info for tools. A
// handler that panics fails its request with an internal error, logged
// with its stack, instead of taking down the daemon every client shares.
func (s *Server) logRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		start := time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.log.Error("request handler panicked", logMethod, method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("flyd failed on %s: %v (a bug: please report it)", method, p)}
				}
			}()
			res, err = next(ctx, method, req)
		}()
		level := slog.LevelDebug
		attrs := []slog.Attr{
			slog.String(logCID, fmt.Sprintf("%x", requestSeq.Add(1))),
			slog.String(logSession, sessionID(req)),
			slog.String(logMethod, method),
		}
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			level = slog.LevelInfo
			attrs = append(attrs, slog.String(logTool, mcpconn.BoundText(p.Name, mcpconn.MaxLogValue)))
		case *mcp.ReadResourceParams:
			attrs = append(attrs, slog.String(logAttrURI, mcpconn.BoundText(p.URI, mcpconn.MaxLogValue)))
		case *mcp.SubscribeParams:
			attrs = append(attrs, slog.String(logAttrURI, mcpconn.BoundText(p.URI, mcpconn.MaxLogValue)))
		}
		attrs = append(attrs, slog.Float64(logElapsed, float64(time.Since(start).Microseconds())/1000))
		if err != nil {
			attrs = append(attrs, slog.String(logErr, mcpconn.BoundText(err.Error(), 4*mcpconn.MaxLogValue)))
		}
		s.log.LogAttrs(ctx, level, "request", attrs...)
		return res, err
	}
}

func sessionID(req mcp.Request) string {
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		return ss.ID()
	}
	return ""
}

// perSession answers what the SDK cannot know per session: the resource
// list comes from the session's own workspace, and workspace URIs get
// their precise refusal before the SDK's template lookup.
func (s *Server) perSession(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.InitializeParams); ok && method == "initialize" {
			mcpconn.BoundInitialize(p)
		}
		if needsWorkspace(method) {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				if sess, err := s.sessionOf(ss); err == nil {
					if err := s.bindWorkspace(ctx, sess); err != nil {
						return nil, err
					}
				}
			}
		}
		if res, ok, err := s.proxyUpstream(ctx, method, req, next); ok {
			return res, err
		}
		switch method {
		case "tools/list":
			return s.listTools(ctx, method, req, next)
		case "resources/list":
			return s.listResources(ctx, req.(*mcp.ListResourcesRequest))
		case "resources/read":
			uri := req.(*mcp.ReadResourceRequest).Params.URI
			switch {
			case strings.HasPrefix(uri, "logs:"):
				// Served here: the SDK's template match does not take a query.
				return s.readLog(ctx, req.(*mcp.ReadResourceRequest))
			case strings.HasPrefix(uri, workspaceScheme+":"):
				// Served here too, so that read and subscribe decide alike
				// whatever the SDK's template match makes of the URI.
				return s.readWorkspace(ctx, req.(*mcp.ReadResourceRequest))
			case !strings.HasPrefix(uri, "fly://"):
				return nil, notFound(uri, "flyd serves workspace:///<path>, logs:// and fly:// resources only")
			}
		case "tools/call":
			if sess, err := s.sessionOf(req.(*mcp.CallToolRequest).Session); err == nil {
				sess.toolsCalled.Add(1)
			}
		}
		return next(ctx, method, req)
	}
}

// The resources/list cursor is opaque to clients. It holds either an
// offset into the head of the list (the fixed resources, then the logs of
// the workspace's runs) or the last file path listed.
const (
	cursorHead  = "head:"
	cursorAfter = "after:"
)

func encodeCursor(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func decodeCursor(c string) (head int, after string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	s := string(b)
	switch {
	case err != nil:
	case strings.HasPrefix(s, cursorAfter):
		return -1, strings.TrimPrefix(s, cursorAfter), nil
	case strings.HasPrefix(s, cursorHead):
		if n, err := strconv.Atoi(strings.TrimPrefix(s, cursorHead)); err == nil && n >= 0 {
			return n, "", nil
		}
	}
	return 0, "", invalidParams("invalid cursor %q: pass back the nextCursor of the previous page", c)
}

// listResources pages through the session's resources: the fixed ones,
// the logs of the workspace's runs, then the workspace's files in path
// order.
func (s *Server) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	if req.Params != nil && s.up != nil && upstream.IsCursor(req.Params.Cursor) {
		return s.listUpstreamResources(ctx, sess, req.Params.Cursor)
	}
	res, err := s.listOwnResources(sess, req)
	if err == nil && res.NextCursor == "" && s.up != nil {
		res.NextCursor = s.up.FirstCursor() // the upstreams' resources follow flyd's own
	}
	return res, err
}

func (s *Server) listOwnResources(sess *session, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	var err error
	head, after := 0, ""
	if req.Params != nil && req.Params.Cursor != "" {
		if head, after, err = decodeCursor(req.Params.Cursor); err != nil {
			return nil, err
		}
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	size := s.cfg.PageSize
	if head >= 0 {
		all := append(s.fixedResources(), s.logResources(sess.ws.root)...)
		if head < len(all) {
			res.Resources = append(res.Resources, all[head:min(len(all), head+size)]...)
		}
		if head+size < len(all) {
			res.NextCursor = encodeCursor(cursorHead + strconv.Itoa(head+size))
			return res, nil
		}
		size -= len(res.Resources)
	}
	files := sess.ws.index.After(after, size+1)
	if len(files) > size {
		files = files[:size]
		res.NextCursor = encodeCursor(cursorAfter + files[len(files)-1].Path)
	}
	if size == 0 && len(files) == 0 && sess.ws.index.Len() > 0 && head >= 0 {
		res.NextCursor = encodeCursor(cursorAfter)
	}
	// Size and time are read per page, fresh: the index keeps paths only.
	for _, f := range index.StatFiles(sess.ws.fsys(), files) {
		res.Resources = append(res.Resources, fileResource(f))
	}
	return res, nil
}

func fileResource(f index.FileInfo) *mcp.Resource {
	r := &mcp.Resource{
		URI:         workspaceURI(f.Path),
		Name:        path.Base(f.Path),
		Title:       f.Path,
		MIMEType:    mimeType(f.Path),
		Size:        f.Size,
		Annotations: &mcp.Annotations{LastModified: f.ModTime.UTC().Format(time.RFC3339)},
	}
	if index.IsGenerated(f.Path) {
		r.Meta = mcp.Meta{"generated": true}
	}
	return r
}

// mimeType names the type of a workspace file; everything served is text.
func mimeType(p string) string {
	switch ext := strings.ToLower(path.Ext(p)); ext {
	case ".dart":
		return "text/x-dart"
	case ".yaml", ".yml", ".lock":
		return "application/yaml"
	case ".md":
		return "text/markdown"
	case ".json", ".arb":
		return "application/json"
	case ".kt", ".kts":
		return "text/x-kotlin"
	case ".swift":
		return "text/x-swift"
	case ".gradle":
		return "text/x-groovy"
	default:
		if t := mime.TypeByExtension(ext); strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "xml") {
			return strings.TrimSuffix(t, "; charset=utf-8")
		}
		return "text/plain"
	}
}

// readWorkspace serves resources/read of a workspace file.
func (s *Server) readWorkspace(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	rel, rng, err := parseWorkspaceURI(uri)
	if err != nil {
		return nil, err
	}
	if why := s.cfg.Rules.Refusal(rel); why != "" {
		return nil, notFound(uri, why)
	}
	c, err := readFile(sess.ws.fsys(), uri, rel, rng, s.cfg.MaxReadBytes)
	if err != nil {
		return nil, err
	}
	sess.filesRead.Add(1)
	text := c.text
	if sp, ok := sess.conn.(mcpconn.Splicer); ok {
		text = sp.Stash(text)
	}
	return &mcp.ReadResourceResult{
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeType(rel), Text: text}},
		Meta:     mcp.Meta{"total": c.total, "start": c.start, "length": c.length},
	}, nil
}

// readFixed serves the fly:// resources.
func (s *Server) readFixed(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	var v any
	switch uri := req.Params.URI; uri {
	case uriOverview:
		v, err = s.overview(sess.ws)
	case uriSessionsCurrent:
		v = sess.info()
	case uriSessionsRecent:
		v = s.recentSessions(sess.ws)
	default:
		return nil, notFound(uri, "no such fly:// resource")
	}
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// overview returns the workspace's cached project overview, computing it
// when a change made it stale.
func (s *Server) overview(w *workspace) (*overview.Overview, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overview != nil {
		return w.overview, nil
	}
	files := w.index.Files()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	o, err := overview.Build(w.fsys(), paths)
	if err != nil {
		return nil, err
	}
	w.overview = o
	return o, nil
}

// recentSessions lists the workspace's live sessions, then ended ones,
// newest first: from the store, so they outlive flyd, else from memory.
func (s *Server) recentSessions(w *workspace) []SessionInfo {
	var out []SessionInfo
	for _, sess := range w.connected() {
		out = append(out, sess.info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return b.Since.Compare(a.Since) })
	if db := s.db; db != nil {
		ended, err := db.Sessions(w.root, maxRecentSessions)
		if err == nil {
			for _, e := range ended {
				out = append(out, SessionInfo(e))
			}
			return out
		}
		s.log.Warn("read ended sessions", logErr, err)
	}
	w.mu.Lock()
	for i := len(w.recent) - 1; i >= 0; i-- {
		out = append(out, w.recent[i])
	}
	w.mu.Unlock()
	return out
}

// subscribe records a subscription of this session only. A workspace
// file must be one that resources/read would serve: the same checks decide.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return err
	}
	uri := req.Params.URI
	if !flydURI(uri) && s.up != nil {
		if ok, err := s.up.Subscribe(ctx, sess, uri); ok {
			return err
		}
	}
	key, err := s.subscriptionKey(uri)
	if err != nil {
		return err
	}
	if strings.HasPrefix(key, workspacePrefix) {
		rel, _, _ := parseWorkspaceURI(key)
		f, _, err := openServed(sess.ws.fsys(), uri, rel)
		if err != nil {
			return err
		}
		f.Close()
	}
	sess.setSubscribed(key, true)
	return nil
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return err
	}
	if uri := req.Params.URI; !flydURI(uri) && s.up != nil {
		if ok, err := s.up.Unsubscribe(ctx, sess, uri); ok {
			return err
		}
	}
	if key, err := s.subscriptionKey(req.Params.URI); err == nil {
		sess.setSubscribed(key, false)
	}
	return nil
}

// subscriptionKey checks that uri can be subscribed to and returns the
// form notifications use: the workspace URI without its range.
func (s *Server) subscriptionKey(uri string) (string, error) {
	switch uri {
	case uriOverview, uriSessionsCurrent, uriSessionsRecent:
		return uri, nil
	}
	if strings.HasPrefix(uri, "logs:") {
		_, id, _, err := parseLogURI(uri)
		if err != nil {
			return "", err
		}
		r, err := s.runs.Get(id)
		if err != nil {
			return "", notFound(uri, err.Error())
		}
		return runs.LogURI(r.Kind(), r.ID()), nil
	}
	rel, _, err := parseWorkspaceURI(uri)
	if err != nil {
		return "", err
	}
	if why := s.cfg.Rules.Refusal(rel); why != "" {
		return "", notFound(uri, why)
	}
	return workspaceURI(rel), nil
}

// workspaceChanged fans a batch of index changes out to the sessions of w:
// resources/updated to each session subscribed to a changed file, and one
// list_changed to every session when files came or went.
func (s *Server) workspaceChanged(w *workspace, c index.Change) {
	listChanged := len(c.Added) > 0 || len(c.Removed) > 0
	overviewStale := listChanged
	for _, p := range slices.Concat(c.Updated, c.Removed) {
		if path.Base(p) == "pubspec.yaml" || p == "pubspec.lock" || p == ".metadata" {
			overviewStale = true
		}
	}
	if overviewStale {
		w.mu.Lock()
		w.overview = nil
		w.mu.Unlock()
	}
	for _, sess := range w.connected() {
		if !sess.ready() {
			continue
		}
		for _, p := range slices.Concat(c.Updated, c.Removed) {
			if uri := workspaceURI(p); sess.subscribed(uri) {
				s.notify(sess, "notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
		if overviewStale && sess.subscribed(uriOverview) {
			s.notify(sess, "notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uriOverview})
		}
		if listChanged {
			s.notify(sess, "notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

func (s *Server) notify(sess *session, method string, params any) {
	// A notification fails only on a session that is closing, which its
	// connection logs once.
	if err := sess.conn.Notify(method, params); err != nil {
		s.log.Debug("notification not delivered", logSession, sess.id, logMethod, method, logErr, err)
	}
}
