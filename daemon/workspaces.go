package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/daemon/modules"

	"github.com/fly-dev/fly/daemon/overview"
	flypaths "github.com/fly-dev/fly/internal/paths"
)

// maxRecentSessions bounds fly://sessions/recent per workspace.
const maxRecentSessions = 50

// workspace is one absolute root with its shared index. Every session on
// the same root uses the same workspace; it stays warm for a while after
// the last one leaves.
type workspace struct {
	root  string
	index *index.Index
	stop  context.CancelFunc // stops index.Run

	ready chan struct{} // closed when index is set, or err
	err   error         // written before ready closes: read it after (usable)

	mu       sync.Mutex
	refs     int                // sessions holding it; guarded by workspaces.mu
	idle     *time.Timer        // pending close after the last release; guarded by workspaces.mu
	sessions map[*session]bool  // connected sessions, for notifications
	recent   []SessionInfo      // newest last
	overview *overview.Overview // cached; nil when stale
	modules  *modules.Builder   // keeps what it read of each file until it changes
	graph    *modules.Graph     // cached; nil when stale
	graphGen uint64             // moves with every change that makes graph stale

	// building serialises module builds, outside mu: a build reads files,
	// and nothing else of the workspace waits for it.
	building sync.Mutex
}

// Root implements mcpserver.Workspace.
func (w *workspace) Root() string { return w.root }

// Index implements mcpserver.Workspace.
func (w *workspace) Index() *index.Index { return w.index }

// Overview implements mcpserver.Workspace: the cached project overview,
// computed again once a change made it stale.
func (w *workspace) Overview() (*overview.Overview, error) {
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

// Modules implements mcpserver.Workspace: the cached module graph, built
// again once a change made it stale (reading only the files that changed).
func (w *workspace) Modules() (*modules.Graph, error) {
	w.building.Lock()
	defer w.building.Unlock()
	w.mu.Lock()
	g, gen := w.graph, w.graphGen
	if w.modules == nil {
		w.modules = modules.NewBuilder()
	}
	b := w.modules
	w.mu.Unlock()
	if g != nil {
		return g, nil
	}
	files := w.index.Files()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	g, err := b.Build(w.fsys(), paths)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if w.graphGen == gen { // else a change came meanwhile: the next read builds again
		w.graph = g
	}
	w.mu.Unlock()
	return g, nil
}

// workspaceChanged is the indexes' hook: a change that makes w's overview
// stale drops it, and the MCP surface tells w's sessions.
func (s *Server) workspaceChanged(w *workspace, c index.Change) {
	if overview.Stale(c.Added, c.Updated, c.Removed) {
		w.mu.Lock()
		w.overview = nil
		w.mu.Unlock()
	}
	if modules.Stale(c.Added, c.Updated, c.Removed) {
		w.mu.Lock()
		w.graph = nil
		w.graphGen++
		b := w.modules
		w.mu.Unlock()
		if b != nil {
			b.Forget(slices.Concat(c.Updated, c.Removed)...)
		}
	}
	conn := w.connected()
	sessions := make([]mcpserver.Session, len(conn))
	for i, sess := range conn {
		sessions[i] = sess
	}
	s.surface.WorkspaceChanged(w, sessions, c)
}

// fsys is the workspace's root directory: every file access of the
// workspace goes through it.
func (w *workspace) fsys() *os.Root { return w.index.Root() }

// connected returns the sessions to notify.
func (w *workspace) connected() []*session {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*session, 0, len(w.sessions))
	for s := range w.sessions {
		out = append(out, s)
	}
	return out
}

// workspaces owns every open workspace and the goroutines of their
// indexes. close stops them all and waits.
type workspaces struct {
	home     string       // refused as a root, with its ancestors
	cache    *index.Cache // the grep cache's budget, shared by every index; nil: each its own
	rules    index.Rules
	linger   time.Duration
	log      *slog.Logger
	onChange func(*workspace, index.Change)
	opened   func() // told after a workspace opens; nil for none

	mu     sync.Mutex
	m      map[string]*workspace
	closed bool
	wg     sync.WaitGroup // index.Run goroutines
}

func newWorkspaces(rules index.Rules, linger time.Duration, log *slog.Logger, onChange func(*workspace, index.Change)) *workspaces {
	return &workspaces{rules: rules, linger: linger, log: log, onChange: onChange, m: make(map[string]*workspace)}
}

var errShuttingDown = errors.New("flyd is shutting down")

// cleanRoot turns a client's workspace path into the key that sessions
// share: absolute, symlinks resolved, and a directory.
func cleanRoot(dir, home string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("workspace %q is not an absolute path", dir)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", dir)
	}
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = h
		}
	}
	if err := flypaths.CheckRoot(root, home); err != nil {
		return "", err
	}
	return root, nil
}

// acquire returns the workspace of dir, indexing it first if no session
// has it open. Concurrent callers for the same root share one build.
// Every successful acquire must be paired with release.
func (ws *workspaces) acquire(dir string) (*workspace, error) {
	root, err := cleanRoot(dir, ws.home)
	if err != nil {
		return nil, err
	}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, errShuttingDown
	}
	w, ok := ws.m[root]
	if ok {
		w.refs++
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		ws.mu.Unlock()
		<-w.ready
		if w.err != nil {
			ws.release(w)
			return nil, w.err
		}
		return w, nil
	}
	w = &workspace{root: root, refs: 1, ready: make(chan struct{}), sessions: make(map[*session]bool)}
	ws.m[root] = w
	ws.mu.Unlock()

	w.err = ws.open(w)
	close(w.ready)
	if w.err != nil {
		ws.mu.Lock()
		delete(ws.m, root)
		ws.mu.Unlock()
		return nil, w.err
	}
	if ws.opened != nil {
		ws.opened()
	}
	return w, nil
}

// open builds w's index and starts watching it.
func (ws *workspaces) open(w *workspace) error {
	start := time.Now()
	idx, err := index.New(w.root, ws.rules, ws.log, func(c index.Change) { ws.onChange(w, c) })
	if err != nil {
		return fmt.Errorf("index workspace %s: %w", w.root, err)
	}
	if ws.cache != nil {
		idx.ShareCache(ws.cache)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.index, w.stop = idx, cancel
	ws.log.Info("workspace indexed", "root", w.root, "files", idx.Len(), "elapsed_ms", time.Since(start).Milliseconds())
	// The walk's garbage goes back to the system now: for 100k files that
	// is 3.5 MiB, which the runtime's scavenger still held 45 s later, and
	// flyd idles for most of its life.
	debug.FreeOSMemory()

	ws.wg.Add(1)
	go func() { // owned by ws: stopped by w.stop, waited for by close
		defer ws.wg.Done()
		if err := idx.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			ws.log.Warn("workspace watch ended", "root", w.root, logErr, err)
		}
	}()
	return nil
}

// release drops one reference; the last one schedules the workspace to
// close after the linger time, unless a session comes back first.
func (ws *workspaces) release(w *workspace) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.refs--
	if w.refs > 0 || ws.closed {
		return
	}
	w.idle = time.AfterFunc(ws.linger, func() {
		ws.mu.Lock()
		if w.refs > 0 || ws.m[w.root] != w {
			ws.mu.Unlock()
			return
		}
		delete(ws.m, w.root)
		ws.mu.Unlock()
		ws.shut(w)
		ws.log.Info("workspace closed after idle", "root", w.root)
	})
}

// shut stops w's index and closes its root.
func (ws *workspaces) shut(w *workspace) {
	<-w.ready
	if w.err != nil {
		return
	}
	w.stop() // Run closes the index and its roots
}

// list returns the open workspaces.
func (ws *workspaces) list() []*workspace {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]*workspace, 0, len(ws.m))
	for _, w := range ws.m {
		out = append(out, w)
	}
	return out
}

// close stops every workspace and waits for their goroutines.
func (ws *workspaces) close() {
	ws.mu.Lock()
	ws.closed = true
	all := ws.m
	ws.m = map[string]*workspace{}
	for _, w := range all {
		if w.idle != nil {
			w.idle.Stop()
		}
	}
	ws.mu.Unlock()
	for _, w := range all {
		ws.shut(w)
	}
	ws.wg.Wait()
}

// openWorkspace opens the workspace of dir for one HTTP request.
func (s *Server) openWorkspace(dir string) (root string, idx *index.Index, release func(), err error) {
	w, err := s.ws.acquire(dir)
	if err != nil {
		return "", nil, nil, err
	}
	return w.root, w.index, func() { s.ws.release(w) }, nil
}

// usable reports whether w is indexed and open: not while it is still
// being indexed (opened says when it is), nor when that failed.
func (w *workspace) usable() bool {
	select {
	case <-w.ready:
		return w.err == nil
	default:
		return false
	}
}

// containing returns the root of the usable workspace that is dir or
// contains it.
func (ws *workspaces) containing(dir string) (string, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	best := ""
	for root, w := range ws.m {
		if !w.usable() {
			continue
		}
		if rel, err := filepath.Rel(root, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) &&
			!filepath.IsAbs(rel) && len(root) > len(best) {
			best = root
		}
	}
	return best, best != ""
}
