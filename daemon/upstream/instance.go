package upstream

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wire"
)

// An instance and who shares it: its state, its sessions joining and
// leaving, its end when idle, its status. Its files by concern:
// instance.go, supervise.go (its process's lifecycle), calls.go (calls
// in flight and their progress), client.go (what the upstream sends
// flyd), lists.go (its tools, prompts and templates).

// Instance states, as Status reports them.
const (
	stateStarting   = "starting"
	stateRunning    = "running"
	stateRestarting = "restarting"
	stateFailing    = "failing" // started, but initialize has not answered for initSlow
)

// initSlow is how long an upstream may take to answer initialize before
// its status says it is failing.
const initSlow = 10 * time.Second

// maxUpstreamLine bounds one message from an upstream.
const maxUpstreamLine = 32 << 20

// instance is one upstream process and its MCP connection, shared by the
// sessions of its scope. Its supervisor starts it, restarts it with
// backoff when it dies and re-makes every live subscription.
type instance struct {
	m    *Manager
	srv  mcpconfig.Server
	key  instKey
	root string            // its working directory and first root
	env  map[string]string // of the session that first needed it

	ctx    context.Context // cancelled by shutdown
	cancel context.CancelFunc
	done   chan struct{}  // closed when supervise returns
	kick   chan struct{}  // a restart request
	bg     sync.WaitGroup // list refreshes; supervise waits for them

	mu       sync.Mutex
	users    map[string]Session
	cs       *mcp.ClientSession // nil while down
	client   *mcp.Client
	proc     Process
	starting Process       // the process of the current attempt, until it initialized
	attempt  time.Time     // when the current attempt started
	up       chan struct{} // closed while cs is connected
	ended    chan struct{} // closed when the current attempt ends
	state    string
	lastErr  string
	restarts int
	lists    lists
	listed   bool                       // lists came from the upstream or the cache
	subs     map[string]map[string]bool // URI → subscribed session ids
	calls    map[uint64]callRec         // in-flight calls
	fresh    chan struct{}              // open while lists the upstream said changed are re-read
	said     map[string]bool            // kinds it said changed, not yet re-read
	progress map[string]*progressRoute  // our progress token → the caller's
	idle     *time.Timer
	roots    map[string]bool
	legacy   bool // a start at 2026-07-28 failed: the next is in the handshake era (era.go)
}

func newInstance(m *Manager, srv mcpconfig.Server, k instKey, first Session) *instance {
	env := maps.Clone(first.Env())
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, srv.Env)
	in := &instance{m: m, srv: srv, key: k, root: first.Root(), env: env,
		done: make(chan struct{}), kick: make(chan struct{}, 1),
		users: map[string]Session{}, up: make(chan struct{}), ended: make(chan struct{}), state: stateStarting,
		subs: map[string]map[string]bool{}, calls: map[uint64]callRec{}, progress: map[string]*progressRoute{},
		roots: map[string]bool{first.Root(): true}}
	in.ctx, in.cancel = context.WithCancel(context.Background())
	if m.cfg.Cache != nil {
		if b, err := m.cfg.Cache.GetCache(cacheKey(srv.Name)); err == nil && json.Unmarshal(b, &in.lists) == nil {
			in.lists, in.listed = in.lists.encoded(), true
		}
	}
	return in
}

// join adds s to the sharing sessions; an upstream shared across
// workspaces (global) gets the new root among its roots.
func (in *instance) join(s Session) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.users[s.ID()] == nil {
		defer in.m.cfg.Changed()
	}
	in.users[s.ID()] = s
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	if r := s.Root(); !in.roots[r] {
		in.roots[r] = true
		if in.client != nil {
			in.client.AddRoots(rootOf(r))
		}
	}
}

func (in *instance) hasUser(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.users[id] != nil
}

// leave drops s and its subscriptions; the last one out starts the idle
// timer (or stops a session-scoped upstream at once).
func (in *instance) leave(s Session) {
	in.mu.Lock()
	delete(in.users, s.ID())
	var unsub []string
	for uri, who := range in.subs {
		if who[s.ID()] {
			delete(who, s.ID())
			if len(who) == 0 {
				delete(in.subs, uri)
				unsub = append(unsub, uri)
			}
		}
	}
	cs := in.cs
	last := len(in.users) == 0
	if last && in.key.scope != sessionScope(s.ID()) && in.idle == nil {
		in.idle = time.AfterFunc(in.m.cfg.Linger, in.idleStop)
	}
	in.mu.Unlock()
	if cs != nil {
		for _, uri := range unsub {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
			cancel()
		}
	}
	if last && in.key.scope == sessionScope(s.ID()) {
		in.shutdown()
	}
}

// idleStop stops an upstream nobody has used for the linger time.
func (in *instance) idleStop() {
	in.mu.Lock()
	idle := len(in.users) == 0 && in.idle != nil
	in.mu.Unlock()
	if idle {
		in.m.forget(in)
		in.m.log.Info("upstream idle: stopped", "upstream", in.srv.Name, "scope", in.key.scope)
		in.shutdown()
	}
}

// shutdown stops the supervisor, which closes the connection and stops
// the process group, and waits for it.
func (in *instance) shutdown() {
	in.mu.Lock()
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	in.mu.Unlock()
	in.cancel()
	<-in.done
}

func (in *instance) restart() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

func (in *instance) status() Status {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := Status{Name: in.srv.Name, Share: in.srv.SharedAs(), State: in.state, Sessions: len(in.users), Restarts: in.restarts}
	if in.srv.SharedAs() != mcpconfig.ShareGlobal {
		st.Workspace = in.root
	}
	if in.state != stateRunning {
		st.Error = in.lastErr
		if p := in.starting; p != nil && time.Since(in.attempt) > initSlow {
			st.State = stateFailing
			st.PID = p.PID()
			st.LogURI = wire.UpstreamLogURI(p.ID())
			st.Error = fmt.Sprintf("no answer to initialize after %s (flyd gives up at %s and restarts it)", time.Since(in.attempt).Round(time.Second), in.srv.Timeout())
			if tail := p.Tail(5); len(tail) > 0 {
				st.Error += "; the last lines of its log:\n" + strings.Join(tail, "\n")
			}
		}
	}
	if in.proc != nil && in.cs != nil {
		st.Protocol = in.cs.InitializeResult().ProtocolVersion
		st.PID = in.proc.PID()
		st.LogURI = wire.UpstreamLogURI(in.proc.ID())
		st.RSSBytes, _ = rss(st.PID) // unknown: left out of the status
	}
	return st
}

func rootOf(dir string) *mcp.Root {
	return &mcp.Root{URI: fileuri.FromPath(dir), Name: dir}
}
