package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/modules"
	"github.com/fly-dev/fly/daemon/overview"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is what the MCP surface is given. Zero values are not defaults:
// the daemon fills every field.
type Config struct {
	PageSize        int           // resources/list page
	MaxReadBytes    int64         // largest resources/read result
	Rules           index.Rules   // which workspace files are served
	MaxRuns         int           // live flutter runs per workspace
	MaxBuilds       int           // concurrent builds per workspace
	RunStartTimeout time.Duration // how long flutter_run waits for app.started
	BuildTimeout    time.Duration
	// MaxListens bounds the subscriptions/listen streams open over HTTP
	// at once, each of which holds a connection (default 64); the daemon
	// keeps it well below its TCP connection cap. MaxSessionListens bounds
	// one session's on any transport (default 8).
	MaxListens        int
	MaxSessionListens int

	Runs     *runs.Engine
	Sessions Sessions
	Log      *slog.Logger
	// Apps lists the apps found outside fly, of a workspace root ("" for
	// all); nil for none.
	Apps func(root string) []wire.App
}

// Sessions is the daemon's table of connected clients. Its methods may
// be called concurrently.
type Sessions interface {
	// Of returns the session behind an SDK session, nil if none.
	Of(ss *mcp.ServerSession) Session
	// Bind gives a session that has no workspace yet (Streamable HTTP
	// without ?workspace=) the client's first root, once; it returns the
	// error to answer the request with when it cannot.
	Bind(ctx context.Context, s Session) error
	// All returns the connected sessions.
	All() []Session
	// Recent lists the sessions of root, connected then ended, newest
	// first.
	Recent(root string) []wire.Session
}

// Session is one connected client, as the daemon keeps it.
type Session interface {
	upstream.Session // ID, Root, Env, MCP, and Notify, which reaches an initialized client only and never waits

	Workspace() Workspace // nil while unbound
	// Handle names the session in what other clients see: Info's ID,
	// claims and news. It is not derived from ID, which it never shows.
	Handle() string
	// Transient reports whether the session lasts one request only (a
	// 2026-07-28 client over HTTP that sends no X-Fly-Client): a claim
	// would end as it is granted.
	Transient() bool
	Info() wire.Session // its ID is the Handle
	Subscribed(uri string) bool
	SetSubscribed(uri string, on bool)
	// Listen records a subscriptions/listen stream (protocol 2026-07-28)
	// of the session, opened on its connection conn (the SDK session's
	// id), and sends its acknowledgement with ack, which never waits:
	// from then on the notifications it agreed to (resource URIs in the
	// form notifications use) go there, stamped with its id, until ctx
	// ends. It returns ack's error, and records nothing then.
	Listen(ctx context.Context, conn string, id any, agreed mcp.NotificationSubscriptions, ack func() error) error
	Tools() *toolfilter.Filter // the tools the client asked for; nil for all
	FileRead()                 // counts a file read
	ToolCalled()               // counts a tool call
	// Stash gives a large text of a result to the connection, which
	// writes it without the SDK encoding it; the result holds what it
	// returns instead (the text itself where the connection cannot).
	Stash(text string) string
}

// Workspace is a served root with its warm index, shared by its sessions.
type Workspace interface {
	Root() string
	Index() *index.Index // its Root is the only way to the workspace's files
	// Overview is the project overview, cached until a change makes it
	// stale (see overview.Stale).
	Overview() (*overview.Overview, error)
	// Modules is the module graph, cached until a change makes it stale
	// (see modules.Stale).
	Modules() (*modules.Graph, error)
}

// Server is flyd's MCP surface: one mcp.Server that every session
// connects to. Create it with New; Close it after the runs engine.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mcp      *mcp.Server
	runs     *runs.Engine
	sessions Sessions
	up       *upstream.Manager // set once by UseUpstreams, before serving
	own      map[string]bool   // names of flyd's own tools and prompts: upstreams never shadow them
	tools    map[string]ownTool

	toolsMu  sync.Mutex
	ownTools []*mcp.Tool // flyd's tools/list, schemas encoded once; nil until the first

	mu          sync.Mutex
	notifying   map[string]bool // runs whose log has a followLog goroutine
	listed      map[string]bool // live runs whose start was announced by list_changed
	notifyWG    sync.WaitGroup  // followLog and followErrors goroutines
	listens     map[string]int  // open subscriptions/listen streams per session handle
	httpListens int             // those of them over HTTP
}

// New builds the MCP surface for cfg: every tool, prompt, resource and
// template, registered once. It does no I/O.
func New(cfg Config) *Server {
	if cfg.MaxListens <= 0 {
		cfg.MaxListens = 64
	}
	if cfg.MaxSessionListens <= 0 {
		cfg.MaxSessionListens = 8
	}
	s := &Server{cfg: cfg, listens: make(map[string]int), log: cfg.Log, runs: cfg.Runs, sessions: cfg.Sessions, own: make(map[string]bool), tools: make(map[string]ownTool),
		notifying: make(map[string]bool), listed: make(map[string]bool)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "flyd", Title: "fly", Version: wire.Version}, &mcp.ServerOptions{
		Instructions:              instructions,
		Logger:                    s.log.With("component", "mcp"),
		PageSize:                  s.cfg.PageSize,
		SubscribeHandler:          s.subscribe,
		CompletionHandler:         s.complete,
		UnsubscribeHandler:        s.unsubscribe,
		SupportedProtocolVersions: ProtocolVersions(),
		SetCacheable:              setCacheable,
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
			Description: "The log of " + what + ": one line per entry (seq time stream text): the app's output, errors and fly's notes. Add ?since=SEQ, ?tail=N, ?start=&length=, ?events=1 for flutter's machine events or ?stream=stdout,stderr,error,event,fly; _meta gives first_seq, last_seq and total.",
		}, s.readLog)
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "module", Title: "Module detail", MIMEType: "text/markdown", URITemplate: moduleTemplate,
		Description: "One module of fly://project/modules: its key files and their roles, patterns and dependencies. Names complete.",
	}, s.readModule)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "run-errors", Title: "Errors of a run", MIMEType: "text/plain", URITemplate: "fly://runs/{id}/errors",
		Description: "A flutter run's framework errors since its last reload, deduplicated, newest first (as flutter_errors gives them). Subscribe to be told when they change.",
	}, s.readErrors)
	s.addTools(srv)
	s.addPrompts(srv)
	srv.AddReceivingMiddleware(s.logRequests, s.cacheHints, s.completeResults, s.capListens, s.perSession)
	srv.AddSendingMiddleware(s.trackListens)
	s.mcp = srv
	return s
}

// MCP is the server every session connects to.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// UseUpstreams adds the upstreams' tools, prompts and resources to every
// session's. Call it once, before serving.
func (s *Server) UseUpstreams(m *upstream.Manager) { s.up = m }

// Reserved reports whether name is one of flyd's own tools or prompts,
// which no upstream may shadow.
func (s *Server) Reserved(name string) bool { return s.own[name] }

// Close waits for the log followers, which end when their runs' logs
// close: call it after closing the runs engine.
func (s *Server) Close() { s.notifyWG.Wait() }

// Fixed resources, listed first on the first page of resources/list.
const (
	uriOverview        = "fly://project/overview"
	uriModules         = "fly://project/modules"
	moduleTemplate     = "fly://module/{name}"
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
	logErr     = logkey.Error
)

const instructions = `flyd is shared by every client on this machine: files, running apps, their logs and errors are the same for all.
Apps: flutter_run starts the app (or attaches to one an IDE started) and returns run_id; after editing Dart code call flutter_hot_reload, which says whether the edit applied and what new errors the app hit; flutter_errors lists errors, flutter_inspect shows widgets or a screenshot, flutter_stop ends the run. A run_id left out means the newest live run of this workspace; logs_read and flutter_errors fall back to its most recent run. Results start with "Meanwhile:" when other agents acted on the run.
Logs: logs_read returns the newest lines (about 16 KB); page back with before, follow with since=next_since.
Files: files_find {glob}, files_grep {pattern}, files_read {path} answer from a warm index; workspace:///<path> resources too.
Project: fly://project/overview and fly://project/modules (markdown), fly://module/{name} for one module.`

// ProtocolVersions are the MCP versions flyd serves: both eras, the
// handshake ones (initialize, a session per connection) and 2026-07-28
// (server/discover, every request carrying its version and client in
// _meta, notifications on subscriptions/listen streams).
func ProtocolVersions() []string { return mcp.SupportedProtocolVersions() }

func (s *Server) fixedResources() []*mcp.Resource {
	return []*mcp.Resource{
		{URI: uriOverview, Name: "project-overview", Title: "Project overview", MIMEType: "text/markdown",
			Description: "The Flutter/Dart project of this workspace: name, SDK constraints, dependencies, platforms, entry points, tests, packages, modules. Add ?format=json for JSON."},
		{URI: uriModules, Name: "project-modules", Title: "Project modules", MIMEType: "text/markdown",
			Description: "Every module (packages, feature folders of lib/): kind, path, file and test counts, key files by role, imports between them."},
		{URI: uriSessionsCurrent, Name: "session-current", Title: "This session", MIMEType: "application/json",
			Description: "This MCP session: client name and version, since when, files read, tools called."},
		{URI: uriSessionsRecent, Name: "sessions-recent", Title: "Recent sessions", MIMEType: "application/json",
			Description: "The sessions of this workspace, connected and recently ended, newest first."},
	}
}

// client is the session of a request, with its workspace (nil while a
// session over HTTP has none).
type client struct {
	Session
	ws Workspace
}

// sessionOf finds flyd's session behind an SDK session.
func (s *Server) sessionOf(ss *mcp.ServerSession) (*client, error) {
	if ss != nil {
		if sess := s.sessions.Of(ss); sess != nil {
			return &client{Session: sess, ws: sess.Workspace()}, nil
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

// cacheHints puts the caching hint on every result that carries one,
// whoever built it: the SDK, flyd or an upstream.
func (s *Server) cacheHints(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil && res != nil {
			withCacheHint(method, res)
		}
		return res, err
	}
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
					if err := s.sessions.Bind(ctx, sess.Session); err != nil {
						return nil, err
					}
				}
			}
		}
		if method == "tools/call" {
			if res := s.refuseFiltered(req.(*mcp.CallToolRequest)); res != nil {
				return res, nil
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
			case strings.HasPrefix(uri, "fly://module/"):
				return s.readModule(ctx, req.(*mcp.ReadResourceRequest))
			case strings.HasPrefix(uri, uriOverview+"?"):
				return s.readFixed(ctx, req.(*mcp.ReadResourceRequest))
			case strings.HasPrefix(uri, workspaceScheme+":"):
				// Served here too, so that read and subscribe decide alike
				// whatever the SDK's template match makes of the URI.
				return s.readWorkspace(ctx, req.(*mcp.ReadResourceRequest))
			case !strings.HasPrefix(uri, "fly://"):
				return nil, notFound(uri, "flyd serves workspace:///<path>, logs:// and fly:// resources only")
			}
		case "tools/call":
			if sess, err := s.sessionOf(req.(*mcp.CallToolRequest).Session); err == nil {
				sess.ToolCalled()
			}
		}
		return next(ctx, method, req)
	}
}

// needsWorkspace reports whether a method works on the session's
// workspace: all but the handshake, pings, logging and notifications.
func needsWorkspace(method string) bool {
	switch method {
	case "initialize", "ping", "logging/setLevel":
		return false
	}
	return !strings.HasPrefix(method, "notifications/")
}
