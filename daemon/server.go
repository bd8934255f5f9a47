package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/dtd"
	"github.com/fly-dev/fly/daemon/endpoint"
	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/localapi"
	"github.com/fly-dev/fly/daemon/loopback"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/daemon/peerhandle"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/upstream"

	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/owner"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// flyd's Server: its config, starting and stopping it, its routes and its
// status. (connect.go connects its MCP sessions.)

// Config is everything flyd is told at start. The zero value of a field
// means its default.
type Config struct {
	Paths flypaths.Paths // socket and state directory
	Home  string         // the user's home directory: it and its ancestors are refused as workspaces

	MaxMessageBytes int64         // largest MCP message accepted (default 4 MiB)
	PageSize        int           // resources/list page (default 100)
	MaxReadBytes    int64         // largest resources/read result (default 1 MiB)
	WriteTimeout    time.Duration // deadline of one write to a client (default 5s)
	Linger          time.Duration // how long a workspace stays indexed with no session (default 10m)
	Rules           index.Rules   // which workspace files are served (default DefaultRules)
	GrepCacheBytes  int64         // file contents kept for files_grep, all workspaces together (default index.DefaultCacheBytes); negative: none
	NoGrepReadAhead bool          // the grep cache keeps only what searches read: no warmer reads a workspace ahead

	Flutter         string        // the flutter executable; default: flutter on each session's PATH (flutter.bat on Windows), else in FLUTTER_ROOT/bin
	MaxRuns         int           // live flutter runs per workspace (default 2)
	MaxBuilds       int           // concurrent builds per workspace (default 3)
	BuildTimeout    time.Duration // default 30m
	RunStartTimeout time.Duration // how long flutter_run waits for app.started (default 10m)
	StopGrace       time.Duration // wait after app.stop and after SIGTERM (default 5s)
	RingEntries     int           // log ring bound per run, entries (default 1000)
	RingBytes       int           // log ring bound per run, bytes of text (default 100 KiB)
	KeepRuns        int           // finished runs kept in the store (default 100)
	MaxRunAge       time.Duration // finished runs older than this are deleted (default 7 days)
	Upstreams       string        // the upstreams file; default Paths.Upstreams(), "-" for none
	DTDDir          string        // where DTDs write their files (dtd.Dir); "" for no discovery of apps started elsewhere
	// Subreaper makes flyd adopt what its runs orphan (Linux; see
	// runs.Config.Subreaper). Only for a process that is flyd itself.
	Subreaper bool
	// LoginEnv is the user's login environment, which fills what a
	// client leaves out of its runs' environment (runs.Config.LoginEnv);
	// nil: nothing is filled from it.
	LoginEnv func() (map[string]string, string)
	// HTTPSessionIdle is how long a Streamable HTTP session may have no
	// request in flight before it is closed (default 30m).
	HTTPSessionIdle time.Duration
	// Listen is the loopback TCP address (token-guarded) for HTTP clients
	// and the dashboard; "" for none (flyd's flag defaults to DefaultListen).
	Listen string
	// HolderExe, when set, is flyd's own binary: each flutter run is then
	// kept by a holder process of it (`flyd hold`, internal/holder) in
	// Paths.Runs(), and outlives flyd: a restart of flyd, planned or not,
	// keeps the runs, and the next flyd takes them back. "": every run
	// ends with flyd.
	HolderExe string
	// StoredLogEntries and StoredLogBytes bound the persisted log of one
	// run (defaults 100,000 entries and 32 MiB).
	StoredLogEntries int
	StoredLogBytes   int64

	Log *slog.Logger // default: discard
}

// DefaultConfig is the configuration of a zero Config: flyd's flags
// take their defaults from it, so they are set in one place.
func DefaultConfig() Config {
	return Config{
		MaxMessageBytes: 4 << 20,
		PageSize:        100,
		MaxReadBytes:    1 << 20,
		WriteTimeout:    5 * time.Second,
		Linger:          10 * time.Minute,
		Rules:           index.DefaultRules(),
		GrepCacheBytes:  index.DefaultCacheBytes(),
		MaxRuns:         2,
		MaxBuilds:       3,
		BuildTimeout:    30 * time.Minute,
		RunStartTimeout: 10 * time.Minute,
		StopGrace:       5 * time.Second,
		RingEntries:     1000,
		RingBytes:       100 << 10,
		KeepRuns:        100,
		MaxRunAge:       7 * 24 * time.Hour,
		HTTPSessionIdle: 30 * time.Minute,
	}
}

// connIdle is how long a keep-alive connection may wait for its next
// request, on both listeners: an idle one costs a file descriptor.
const connIdle = 15 * time.Second

func (c *Config) setDefaults() {
	d := DefaultConfig()
	or := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.MaxReadBytes <= 0 {
		c.MaxReadBytes = d.MaxReadBytes
	}
	or(&c.PageSize, d.PageSize)
	c.PageSize = max(c.PageSize, 4) // room for the fixed resources on page one
	or(&c.MaxRuns, d.MaxRuns)
	or(&c.MaxBuilds, d.MaxBuilds)
	orDur(&c.WriteTimeout, d.WriteTimeout)
	orDur(&c.Linger, d.Linger)
	orDur(&c.BuildTimeout, d.BuildTimeout)
	orDur(&c.RunStartTimeout, d.RunStartTimeout)
	orDur(&c.StopGrace, d.StopGrace)
	orDur(&c.HTTPSessionIdle, d.HTTPSessionIdle)
	if c.GrepCacheBytes == 0 {
		c.GrepCacheBytes = d.GrepCacheBytes
	}
	if c.Rules.Extensions == nil && c.Rules.Names == nil {
		c.Rules = d.Rules
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Server is flyd. Create it with New and run it with Run.
type Server struct {
	cfg     Config
	log     *slog.Logger
	surface *mcpserver.Server // the MCP surface every session connects to
	ws      *workspaces
	started time.Time

	runs *runs.Engine
	db   *store.DB                   // sessions and status; the runs engine has its own use of it
	up   *upstream.Manager           // the user's shared MCP servers; nil until Run opened the store
	apps atomic.Pointer[dtd.Watcher] // apps started outside fly; nil without discovery

	api *localapi.API // /v1/* and the dashboard

	stopRequested chan struct{} // closed (once, by requestStop) when a client asks flyd to stop
	stopOnce      sync.Once
	stopRuns      atomic.Bool      // the client asked for every run to stop too
	handleKey     peerhandle.Key   // makes a peer's session handle outlive flyd; nil: none does
	http          httpSessions     // Streamable HTTP sessions
	httpWG        sync.WaitGroup   // their serveSession goroutines
	tokens        *loopback.Tokens // the TCP listener's; nil without one
	httpAddr      string           // where the TCP listener listens; "" without one
	httpWanted    string           // the configured address, when it was taken and httpAddr is another

	mu       sync.Mutex
	sessions map[string]*session
	conns    sync.WaitGroup // session handlers; Run waits for them
}

// New returns a Server for cfg. It does no I/O.
func New(cfg Config) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Log, sessions: make(map[string]*session), stopRequested: make(chan struct{}),
		http: httpSessions{m: make(map[string]*httpSession), byClient: make(map[string]*httpSession)}}
	s.ws = newWorkspaces(cfg.Rules, cfg.Linger, cfg.Log, s.workspaceChanged)
	s.ws.home, s.ws.cache = cfg.Home, index.NewCache(cfg.GrepCacheBytes, !cfg.NoGrepReadAhead)
	s.ws.opened = func() {
		if a := s.apps.Load(); a != nil {
			a.Rescan() // its apps' DTD files may be there already
		}
	}
	var holders *runs.Holders
	if cfg.HolderExe != "" && cfg.Paths.Socket != "" {
		holders = &runs.Holders{Exe: cfg.HolderExe, Dir: cfg.Paths.Runs(), Control: cfg.Paths.RunControl}
	}
	s.runs = runs.New(runs.Config{Flutter: cfg.Flutter, StopGrace: cfg.StopGrace, RingEntries: cfg.RingEntries, RingBytes: cfg.RingBytes,
		Subreaper: cfg.Subreaper, LoginEnv: cfg.LoginEnv, Holders: holders}, cfg.Log, s.runChanged)
	s.surface = mcpserver.New(mcpserver.Config{
		PageSize: cfg.PageSize, MaxReadBytes: cfg.MaxReadBytes, Rules: cfg.Rules, MaxRuns: cfg.MaxRuns, MaxBuilds: cfg.MaxBuilds,
		RunStartTimeout: cfg.RunStartTimeout, BuildTimeout: cfg.BuildTimeout,
		Runs: s.runs, Sessions: sessionTable{s}, Log: cfg.Log, Apps: s.externalApps,
		// Each listen stream over HTTP holds a connection: a quarter of
		// the TCP listener's cap at most, so that the rest always serves
		// other clients and the dashboard.
		MaxListens: min(64, loopback.MaxConns()/4),
	})
	s.api = localapi.New(localapi.Config{
		Runs: s.runs, Status: s.Status, Workspace: s.openWorkspace, RestartUpstream: s.restartUpstream,
		RotateToken: s.rotateToken, Trusted: onSocket, MaxFileBytes: cfg.MaxReadBytes, WriteTimeout: cfg.WriteTimeout, Log: cfg.Log,
		Apps: s.externalApps, Shutdown: s.requestStop,
	})
	return s
}

// Run takes the single-instance lock, listens on the Unix socket and
// serves until ctx is cancelled; then it closes every session, stops the
// indexes and removes the socket. A second flyd gets ErrAlreadyRunning at
// once. Cancellation is a clean stop: Run then returns nil.
func (s *Server) Run(ctx context.Context) error {
	s.started = time.Now()
	p := s.cfg.Paths
	if err := owner.MkdirPrivate(p.StateDir); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	lock, err := endpoint.Acquire(p.Lock())
	if err != nil {
		return err
	}
	defer lock.Release()
	db, err := store.Open(p.DB(), store.Options{KeepRuns: s.cfg.KeepRuns, MaxAge: s.cfg.MaxRunAge, Logger: s.log,
		MaxLogEntries: s.cfg.StoredLogEntries, MaxLogBytes: s.cfg.StoredLogBytes})
	if err != nil {
		return err
	}
	if s.handleKey, err = peerhandle.Load(filepath.Join(p.StateDir, peerhandle.File)); err != nil {
		s.log.Warn("session handles will not outlive this flyd", logErr, err)
	}
	stopStore, err := s.startStore(db, filepath.Join(p.StateDir, "seqmarks"))
	if err != nil {
		return err
	}
	defer stopStore()
	stopUpstreams := s.startUpstreams(db)
	defer stopUpstreams()
	stopApps := s.startApps()
	defer stopApps()
	ln, releaseSocket, err := endpoint.Open(p.Socket)
	if err != nil {
		return err
	}
	defer releaseSocket()

	pl := &endpoint.PeerListener{Listener: ln, User: owner.Current(), Refuse: func(pr endpoint.Peer, err error) {
		s.log.Warn("connection refused: peer is another user", "peer", pr.User.String(), "peer_pid", pr.PID, logErr, err)
	}}
	// Requests end with flyd: a log follow of a run that outlives it is
	// cut (the client resumes from its cursor with the next flyd), not
	// ended with an exit line, and does not hold up the stop.
	base, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       connIdle,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return endpoint.ConnContext(context.WithValue(ctx, connKey{}, c), c)
		},
	}
	hs.RegisterOnShutdown(s.closeHTTPSessions)
	reapCtx, stopReap := context.WithCancel(context.Background())
	reaped := make(chan struct{})
	go func() { // owned by Run: stopped and waited for below
		defer close(reaped)
		s.reapHTTPSessions(reapCtx)
	}()
	defer func() { stopReap(); <-reaped }()
	// The loopback listener, token and address are in place before the
	// socket answers: whoever sees flyd up finds them.
	if tcp := s.startTCP(); tcp != nil {
		defer tcp()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(pl) }() // owned by Run: ended by Shutdown below
	s.log.Info("flyd listening", "socket", p.Socket, "state_dir", p.StateDir, "pid", os.Getpid(), "version", wire.Version)

	select {
	case <-ctx.Done():
	case <-s.stopRequested:
		s.log.Info("flyd asked to stop through its socket")
	case err = <-serveErr:
		err = fmt.Errorf("serve: %w", err)
	}
	s.shutdown(hs, endRequests)
	if err == nil {
		err = <-serveErr
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	s.log.Info("flyd stopped")
	return err
}

// shutdown closes the listener, every session and every workspace, and
// waits for their goroutines.
func (s *Server) shutdown(hs *http.Server, endRequests context.CancelFunc) {
	// Upstreams, then runs: nothing that ends with flyd outlives it (the
	// runs their holders keep go on unless the client asked for every
	// run to stop), and log followers get their exit line or are cut, so
	// the HTTP shutdown below need not wait for them.
	if s.up != nil {
		s.up.Close()
	}
	if s.stopRuns.Load() {
		s.runs.CloseAll()
	} else {
		s.runs.Close()
	}
	endRequests()
	s.api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx) // stops accepting; hijacked WebSockets are ours to close
	s.mu.Lock()
	live := slices.Collect(maps.Values(s.sessions))
	s.mu.Unlock()
	// Sessions close together, each flushing what it still owes its
	// client; one whose client does not read is dropped once the budget
	// is spent, so that no client can hold up flyd's stop.
	var closing sync.WaitGroup
	for _, sess := range live {
		if ss := sess.ss.Load(); ss != nil {
			closing.Go(func() { ss.Close() })
		}
	}
	done := make(chan struct{})
	go func() { // owned by shutdown: ends when every session handler has
		s.conns.Wait()
		close(done)
	}()
	t := time.NewTimer(sessionCloseBudget)
	select {
	case <-done:
	case <-t.C:
		for _, sess := range live {
			if a, ok := sess.conn.(interface{ Abort() }); ok {
				a.Abort()
			}
		}
		<-done
	}
	t.Stop()
	closing.Wait()
	s.httpWG.Wait()
	s.surface.Close()
	s.ws.close()
}

// sessionCloseBudget is how long shutdown lets sessions close cleanly
// before it drops their connections.
const sessionCloseBudget = 3 * time.Second

// startStore hands db to the runs engine and runs its writer. The returned
// function stops the writer, waits for it and closes the file.
func (s *Server) startStore(db *store.DB, marksPath string) (stop func(), err error) {
	s.db = db
	if err := s.runs.Open(db, marksPath); err != nil {
		db.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := db.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("store writer stopped", logErr, err)
		}
	}()
	s.runs.Resume() // the runs a previous flyd left to their holders, with the writer running
	return func() {
		cancel()
		<-done
		if err := db.Close(); err != nil {
			s.log.Error("close store", logErr, err)
		}
	}, nil
}

// Handler is flyd's HTTP API, the same on every listener. Every reply
// carries the daemon's version.
func (s *Server) Handler() http.Handler { return localapi.Headers(s.routes()) }

// routes serves every route, after checking the version a client sent.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.RouteMCP, s.serveMCP)
	mux.HandleFunc(wire.RouteStreamable, s.serveStreamable)
	s.api.Register(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get(wire.HeaderVersion); h != "" {
			if err := wire.CheckPeer("flyd", "flyctl", h); err != nil {
				http.Error(w, err.Error(), http.StatusPreconditionFailed)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// requestStop makes Run stop as if its context were cancelled; with
// req.Runs, every run stops with it.
func (s *Server) requestStop(req wire.ShutdownRequest) {
	if req.Runs {
		s.stopRuns.Store(true)
	}
	s.stopOnce.Do(func() { close(s.stopRequested) })
}

// Close stops what a Server that never ran holds: the runs its sessions
// started and the workspaces ServeTransport opened, and waits for their
// goroutines. Call it once those sessions have ended. Run does the same
// when it stops: a Server that ran needs no Close.
func (s *Server) Close() {
	s.runs.Close()
	s.api.Close()
	s.surface.Close()
	s.ws.close()
}

// Runs returns the engine of flyd's runs, which every session shares: a
// program that embeds flyd (a benchmark, say) may start a run on it
// without a tool call, and follow it.
func (s *Server) Runs() *runs.Engine { return s.runs }

// NextChange returns a channel that is closed at the next change of what
// Status reports: the signal the dashboard's event stream follows.
func (s *Server) NextChange() <-chan struct{} { return s.api.NextChange() }

// Log attribute keys.
const (
	logSession = "session"
	logErr     = logkey.Error
)

// runChanged is the runs engine's hook, called at every state change of
// a run: the HTTP API's status and the MCP surface's notifications follow.
func (s *Server) runChanged(r *runs.Run) {
	s.api.RunChanged(r)
	s.surface.RunChanged(r)
}

// RunInfo is a run as the status reports it: the wire type.
type RunInfo = wire.Run

// Status is the reply of GET /v1/status: the wire type.
type Status = wire.Status

// WorkspaceStatus describes one open workspace: the wire type.
type WorkspaceStatus = wire.WorkspaceStatus

// Status is what GET /v1/status answers: flyd's sessions, open
// workspaces, live runs, upstreams and apps, as they are now.
func (s *Server) Status() Status {
	st := Status{
		Version:    wire.Version,
		Protocol:   wire.Protocol,
		PID:        os.Getpid(),
		StartedAt:  s.started,
		UptimeSec:  time.Since(s.started).Seconds(),
		Socket:     s.cfg.Paths.Socket,
		StateDir:   s.cfg.Paths.StateDir,
		HTTP:       s.httpAddr,
		HTTPWanted: s.httpWanted,
		GrepCache:  wire.GrepCache{Bytes: s.ws.cache.Used(), Limit: s.ws.cache.Limit()},
		Sessions:   []SessionInfo{},
		Workspaces: []WorkspaceStatus{},
		Runs:       []RunInfo{},
		Apps:       s.externalApps(""),
	}
	if db := s.db; db != nil {
		st.DBBytes, _ = db.Size()
		if r := db.Recovery(); r != "" {
			st.Notices = append(st.Notices, r)
		}
	}
	for _, r := range s.runs.Live() {
		st.Runs = append(st.Runs, r.Info())
	}
	slices.SortFunc(st.Runs, func(a, b RunInfo) int { return strings.Compare(a.RunID, b.RunID) })
	s.mu.Lock()
	for _, sess := range s.sessions {
		st.Sessions = append(st.Sessions, sess.info())
	}
	s.mu.Unlock()
	slices.SortFunc(st.Sessions, func(a, b SessionInfo) int { return a.Since.Compare(b.Since) })
	for _, w := range s.ws.list() {
		if !w.usable() {
			continue
		}
		is := w.index.Stats()
		st.Workspaces = append(st.Workspaces, WorkspaceStatus{
			Root: w.root, Files: is.Files, Sessions: len(w.connected()),
			WatchedDirs: is.Dirs, WatchErrors: is.WatchErrors, BuildMS: is.BuildTime.Milliseconds(), CacheBytes: is.CacheBytes,
		})
	}
	slices.SortFunc(st.Workspaces, func(a, b WorkspaceStatus) int { return strings.Compare(a.Root, b.Root) })
	st.Upstreams = []wire.Upstream{}
	if s.up != nil {
		ups, cerr := s.up.Status()
		st.Upstreams = append(st.Upstreams, ups...)
		if cerr != "" {
			st.Notices = append(st.Notices, "upstreams config refused (the previous one is kept): "+cerr)
		}
	}
	return st
}
