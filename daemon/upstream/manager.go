// Package upstream shares the user's other MCP servers (dart mcp-server
// first) between every flyd session: one process per server and
// workspace (or one for all, or one per session), started on first use,
// restarted after a crash, stopped when idle. It is the go-sdk's client
// side: it proxies tools, prompts, resources, templates, subscriptions,
// completion, progress, cancellation, logging, sampling and elicitation,
// and answers the upstream's roots/list with the workspace root. It
// speaks MCP 2026-07-28 to upstreams that offer it and the handshake era
// to the others, and carries requests for input between the eras of
// client and upstream (era.go, mrtr.go).
//
// It owns the upstream processes' MCP connections and the bookkeeping of
// who shares what. It does not own the processes (Config.Start does: the
// runs engine gives them a process group and a persisted log), the
// sessions (the daemon's) or the config file (the user's).
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fsnotify/fsnotify"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Session is one downstream MCP client, as the daemon knows it.
type Session interface {
	ID() string
	Root() string                     // its workspace root
	Env() map[string]string           // the client's environment (see runs)
	Notify(method string, params any) // to this session only; never blocks for long
	MCP() *mcp.ServerSession          // nil before the client initialized
}

// Process is a started upstream process. The runs engine's upstream runs
// are Processes: a process group, a persisted log of stderr.
type Process interface {
	ID() string // of its log: logs://upstream/{id}
	PID() int
	Stdio() (io.WriteCloser, io.ReadCloser)
	Done() <-chan struct{} // closed when it has exited and its stderr is read
	Tail(n int) []string   // the newest n lines of its log
	Stop(ctx context.Context) error
}

// StartFunc starts srv's command in root with env (the first session's
// environment over which srv.Env is laid).
type StartFunc func(ctx context.Context, srv mcpconfig.Server, root string, env map[string]string) (Process, error)

// Cache keeps the upstreams' lists across flyd restarts.
type Cache interface {
	GetCache(key string) ([]byte, error)
	PutCache(key string, val []byte) error
}

// Config is what a Manager is told at start.
type Config struct {
	Path     string        // upstreams.json; "" for none
	Start    StartFunc     // required
	Cache    Cache         // optional
	Linger   time.Duration // an upstream nobody uses stops after it (default 10m)
	Reserved func(name string) bool
	Changed  func() // told when an upstream starts, stops or is shared anew
	Log      *slog.Logger
}

// Manager owns every upstream instance and its goroutines. Run watches
// the config; Close stops every upstream and waits.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	servers  []mcpconfig.Server
	loadErr  error
	insts    map[instKey]*instance
	sessions map[string]Session
	owners   map[string]string // resource URI → server that listed it first
	twice    map[string]bool   // URIs claimed twice, logged once
	closed   bool
	wg       sync.WaitGroup // instance supervisors and relayed calls
	relays   relays         // 2026-07-28 clients' calls waiting on their input (mrtr.go)
}

type instKey struct{ server, scope string }

// New returns a Manager and loads the config once. A broken config is
// logged and reported by Status; flyd runs without upstreams then.
func New(cfg Config) *Manager {
	if cfg.Linger <= 0 {
		cfg.Linger = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Reserved == nil {
		cfg.Reserved = func(string) bool { return false }
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	m := &Manager{cfg: cfg, log: cfg.Log, insts: map[instKey]*instance{}, sessions: map[string]Session{},
		owners: map[string]string{}, twice: map[string]bool{}}
	m.reload()
	return m
}

// Load reads path as flyd's upstreams file: the user's only. It refuses
// a file that others can write (it decides what flyd runs), and checks
// the servers' tool names, as last cached, for collisions.
func Load(path string, cache Cache) ([]mcpconfig.Server, error) {
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if err := checkOwner(path, fi); err != nil {
		return nil, err
	}
	f, err := mcpconfig.ReadFile(path)
	if err != nil {
		return nil, err
	}
	servers, err := mcpconfig.Upstreams(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cache != nil {
		seen := map[string]string{}
		for _, s := range servers {
			l := cachedLists(cache, s.Name)
			for _, t := range l.Tools {
				n := exposedName(s.ToolPrefix(), t.Name)
				if other, ok := seen[n]; ok {
					return nil, fmt.Errorf("%s: servers %s and %s both give a tool named %s: give one a \"prefix\"", path, other, s.Name, n)
				}
				seen[n] = s.Name
			}
		}
	}
	return servers, nil
}

// reload reads the config and applies it: upstreams whose entry changed
// or went are stopped (the next use starts the new one), others are left
// alone. Every session is told the lists may have changed.
func (m *Manager) reload() {
	servers, err := Load(m.cfg.Path, m.cfg.Cache)
	m.mu.Lock()
	if err != nil {
		m.loadErr = err
		m.mu.Unlock()
		m.log.Error("upstreams config refused; keeping the previous one", "path", m.cfg.Path, logkey.Error, err)
		return
	}
	old := m.servers
	m.servers, m.loadErr = servers, nil
	var stop []*instance
	for k, in := range m.insts {
		i := slices.IndexFunc(servers, func(s mcpconfig.Server) bool { return s.Name == k.server })
		if i < 0 || !servers[i].Equal(in.srv) {
			stop = append(stop, in)
			delete(m.insts, k)
		}
	}
	changed := len(stop) > 0 || len(old) != len(servers)
	for i := range min(len(old), len(servers)) {
		changed = changed || !old[i].Equal(servers[i])
	}
	sessions := m.sessionsLocked()
	m.mu.Unlock()
	for _, in := range stop {
		in.shutdown()
	}
	if changed {
		m.log.Info("upstreams config loaded", "path", m.cfg.Path, "servers", len(servers), "stopped", len(stop))
		for _, s := range sessions {
			s.Notify("notifications/tools/list_changed", &mcp.ToolListChangedParams{})
			s.Notify("notifications/prompts/list_changed", &mcp.PromptListChangedParams{})
			s.Notify("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

func (m *Manager) sessionsLocked() []Session {
	out := make([]Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}

// Run watches the config file's directory and reloads on change, until
// ctx is cancelled. The directory is created (0700) if missing, so that
// a file written later is seen.
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Path == "" {
		<-ctx.Done()
		return nil
	}
	dir := filepath.Dir(m.cfg.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		m.log.Warn("upstreams config directory", "dir", dir, logkey.Error, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch upstreams config: %w", err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		m.log.Warn("upstreams config changes will need a flyd restart", "dir", dir, logkey.Error, err)
		<-ctx.Done()
		return nil
	}
	name := filepath.Base(m.cfg.Path)
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Base(ev.Name) == name {
				debounce = time.After(100 * time.Millisecond)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			m.log.Warn("watch upstreams config", logkey.Error, err)
			debounce = time.After(100 * time.Millisecond)
		case <-debounce:
			debounce = nil
			m.reload()
		}
	}
}

// Close stops every upstream and waits for their goroutines. Later calls
// fail.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	insts := make([]*instance, 0, len(m.insts))
	for _, in := range m.insts {
		insts = append(insts, in)
	}
	clear(m.insts)
	m.mu.Unlock()
	m.relays.mu.Lock()
	waiting := slices.Collect(maps.Values(m.relays.m))
	m.relays.mu.Unlock()
	for _, r := range waiting {
		m.dropRelay(r)
	}
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(in.shutdown)
	}
	wg.Wait()
	m.wg.Wait()
}

// Servers returns the configured upstreams in order.
func (m *Manager) Servers() []mcpconfig.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.servers)
}

// Join registers a session: it is told of changes from now on. Its
// upstreams start when it first uses them.
func (m *Manager) Join(s Session) {
	m.mu.Lock()
	m.sessions[s.ID()] = s
	m.mu.Unlock()
}

// Attend makes s a user of every upstream it shares, starting those not
// running: a client that listens for tool and prompt list changes hears
// of an upstream's without having called it first. It does not wait.
func (m *Manager) Attend(s Session) {
	for _, srv := range m.Servers() {
		if _, err := m.instance(srv, s); err != nil {
			m.log.Debug("upstream not attended", "upstream", srv.Name, "session", s.ID(), logkey.Error, err)
		}
	}
}

// Leave forgets a session: its subscriptions are dropped (the upstream
// is unsubscribed when it was the last), its session-scoped upstreams
// stop, and upstreams nobody else uses start their idle timer.
func (m *Manager) Leave(s Session) {
	m.mu.Lock()
	delete(m.sessions, s.ID())
	var mine []*instance
	for k, in := range m.insts {
		if in.hasUser(s.ID()) {
			mine = append(mine, in)
		}
		if k.scope == sessionScope(s.ID()) {
			delete(m.insts, k)
		}
	}
	m.mu.Unlock()
	for _, in := range mine {
		in.leave(s)
	}
}

func sessionScope(id string) string { return "session:" + id }

func scopeOf(srv mcpconfig.Server, s Session) string {
	switch srv.SharedAs() {
	case mcpconfig.ShareGlobal:
		return ""
	case mcpconfig.ShareSession:
		return sessionScope(s.ID())
	}
	return s.Root()
}

var errClosed = errors.New("flyd is shutting down")

// instance returns the upstream of srv that s shares, creating and
// starting it on first use.
func (m *Manager) instance(srv mcpconfig.Server, s Session) (*instance, error) {
	k := instKey{srv.Name, scopeOf(srv, s)}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errClosed
	}
	in := m.insts[k]
	if in == nil {
		in = newInstance(m, srv, k, s)
		m.insts[k] = in
		m.wg.Add(1)
		go func() { // owned by the manager: ends when the instance is shut down
			defer m.wg.Done()
			in.supervise()
		}()
	}
	m.mu.Unlock()
	in.join(s)
	return in, nil
}

// forget removes in from the manager if it is still the current one for
// its key (an idle stop).
func (m *Manager) forget(in *instance) {
	m.mu.Lock()
	if m.insts[in.key] == in {
		delete(m.insts, in.key)
	}
	m.mu.Unlock()
}

// Status describes every live upstream, then any config error.
func (m *Manager) Status() (ups []Status, configErr string) {
	m.mu.Lock()
	insts := make([]*instance, 0, len(m.insts))
	for _, in := range m.insts {
		insts = append(insts, in)
	}
	if m.loadErr != nil {
		configErr = m.loadErr.Error()
	}
	m.mu.Unlock()
	for _, in := range insts {
		ups = append(ups, in.status())
	}
	slices.SortFunc(ups, func(a, b Status) int {
		return strings.Compare(a.Name+"\x00"+a.Workspace, b.Name+"\x00"+b.Workspace)
	})
	return ups, configErr
}

// Status is one upstream instance as people see it: the wire type.
type Status = wire.Upstream

// Restart restarts every instance of the server named name (all of them
// when name is ""), and reports how many there were.
func (m *Manager) Restart(name string) (int, error) {
	m.mu.Lock()
	if name == "*" {
		name = ""
	}
	known := name == "" || slices.ContainsFunc(m.servers, func(s mcpconfig.Server) bool { return s.Name == name })
	var insts []*instance
	for k, in := range m.insts {
		if name == "" || k.server == name {
			insts = append(insts, in)
		}
	}
	m.mu.Unlock()
	if !known {
		return 0, fmt.Errorf("no upstream named %q in %s", name, m.cfg.Path)
	}
	for _, in := range insts {
		in.restart()
	}
	return len(insts), nil
}

// lists is what an upstream offers, as cached.
type lists struct {
	Tools     []*mcp.Tool             `json:"tools,omitempty"`
	Prompts   []*mcp.Prompt           `json:"prompts,omitempty"`
	Templates []*mcp.ResourceTemplate `json:"templates,omitempty"`
}

// encoded returns l with its tools' schemas as JSON: they pass through
// untouched, and each tools/list then copies bytes instead of walking maps.
func (l lists) encoded() lists {
	tools := make([]*mcp.Tool, len(l.Tools))
	for i, t := range l.Tools {
		c := *t
		c.InputSchema, c.OutputSchema = RawSchema(t.InputSchema), RawSchema(t.OutputSchema)
		tools[i] = &c
	}
	l.Tools = tools
	return l
}

// RawSchema is a tool schema encoded once, or nil for none.
func RawSchema(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return v
	}
	return json.RawMessage(b)
}

func cacheKey(server string) string { return "upstream/" + server + "/lists" }

func cachedLists(c Cache, server string) lists {
	var l lists
	if c == nil {
		return l
	}
	if b, err := c.GetCache(cacheKey(server)); err == nil {
		_ = json.Unmarshal(b, &l) // a damaged value is an empty cache
	}
	return l
}
