package upstream

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	progress map[string]progressRoute   // our progress token → the caller's
	idle     *time.Timer
	roots    map[string]bool
	legacy   bool // a start at 2026-07-28 failed: the next is in the handshake era (era.go)
}

// progressGrace is how long progress is still routed after its call.
const progressGrace = 2 * time.Second

type progressRoute struct {
	session string
	token   any
	// The request the call came in, when known (see WithRequest): its
	// progress goes there, on the request's own stream.
	to     *mcp.ServerSession
	reqCtx context.Context
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
		subs: map[string]map[string]bool{}, calls: map[uint64]callRec{}, progress: map[string]progressRoute{},
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

// supervise keeps the upstream running until shutdown: a process that
// dies is restarted after a backoff (1 s doubling to 30 s, back to 1 s
// after a minute of health).
func (in *instance) supervise() {
	defer close(in.done)
	defer in.bg.Wait()
	backoff := time.Second
	for {
		started := time.Now()
		err := in.runOnce()
		if in.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRetryLegacy) {
			continue // still starting: see runOnce
		}
		in.mu.Lock()
		in.restarts++
		in.state = stateRestarting
		in.lastErr = err.Error()
		in.mu.Unlock()
		if errors.Is(err, errRestartRequested) {
			continue
		}
		in.m.log.Warn("upstream down; restarting", "upstream", in.srv.Name, "scope", in.key.scope, "in", backoff, "error", err)
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		t := time.NewTimer(backoff)
		select {
		case <-in.ctx.Done():
			t.Stop()
			return
		case <-in.kick:
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

var errRestartRequested = errors.New("restart requested")

// runOnce starts the process, initializes it, refreshes the lists,
// re-makes the subscriptions, and serves until the process ends or the
// instance is shut down or restarted.
func (in *instance) runOnce() error {
	fail := func(err error) error {
		in.mu.Lock()
		in.lastErr = err.Error()
		end := in.ended
		in.ended = make(chan struct{})
		in.mu.Unlock()
		close(end)
		return err
	}
	in.mu.Lock()
	in.attempt = time.Now()
	in.mu.Unlock()
	proc, err := in.m.cfg.Start(in.ctx, in.srv, in.root, in.env)
	if err != nil {
		return fail(fmt.Errorf("start upstream %s: %w", in.srv.Name, err))
	}
	in.mu.Lock()
	in.starting = proc
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.starting = nil
		in.mu.Unlock()
	}()
	stdin, stdout := proc.Stdio()
	client := mcp.NewClient(&mcp.Implementation{Name: "flyd", Title: "fly (shared for " + in.srv.Name + ")", Version: "1"}, in.clientOptions())
	in.mu.Lock()
	for r := range in.roots {
		client.AddRoots(rootOf(r))
	}
	in.mu.Unlock()
	offer := in.offer()
	ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: maxUpstreamLine},
		&mcp.ClientSessionOptions{ProtocolVersion: offer})
	cancel()
	if err != nil {
		stopProc(proc)
		err = in.describe(proc, fmt.Errorf("initialize: %w", err))
		if wire.IsSessionless(offer) && in.srv.Protocol == "" && in.ctx.Err() == nil {
			// A server of the handshake era answers server/discover with
			// an error, and the SDK falls back; this one failed instead.
			// The next start, at once, is in that era: calls waiting for
			// the upstream wait for it.
			in.mu.Lock()
			in.legacy = true
			in.lastErr = err.Error()
			in.mu.Unlock()
			in.m.log.Info("upstream failed at 2026-07-28: starting it again in the handshake era", "upstream", in.srv.Name, "error", err)
			return fmt.Errorf("%w: %w", errRetryLegacy, err)
		}
		return fail(err)
	}
	if c := cs.InitializeResult().Capabilities; c != nil && c.Logging != nil && !modernConn(cs) {
		// Everything comes to flyd; each session gets what its own level
		// lets through.
		ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			in.m.log.Debug("upstream logging level", "upstream", in.srv.Name, "error", err)
		}
		cancel()
	}
	l, lerr := fetchLists(in.ctx, cs, in.srv.Timeout())
	if lerr != nil {
		in.m.log.Warn("upstream lists", "upstream", in.srv.Name, "error", lerr)
	}
	in.mu.Lock()
	old, had := in.lists, in.listed
	in.cs, in.client, in.proc = cs, client, proc
	in.starting = nil
	in.state = stateRunning
	if lerr == nil {
		in.lists, in.listed = l.encoded(), true
	}
	subs := slices.Collect(maps.Keys(in.subs))
	users := slices.Collect(maps.Values(in.users))
	close(in.up)
	in.mu.Unlock()
	in.m.log.Info("upstream running", "upstream", in.srv.Name, "scope", in.key.scope, "pid", proc.PID(), "log", proc.ID(),
		"protocol", cs.InitializeResult().ProtocolVersion)
	in.m.cfg.Changed()
	defer in.m.cfg.Changed()
	if lerr == nil {
		in.announce(old, l, had, users, nil)
	}
	for _, uri := range subs {
		ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			in.m.log.Warn("re-subscribe after restart", "upstream", in.srv.Name, "uri", uri, "error", err)
		}
		cancel()
	}

	select {
	case <-proc.Done():
		err = in.describe(proc, errors.New("exited"))
	case <-in.ctx.Done():
		err = in.ctx.Err()
	case <-in.kick:
		err = errRestartRequested
	}
	in.mu.Lock()
	in.cs, in.client = nil, nil
	in.up = make(chan struct{})
	in.mu.Unlock()
	cs.Close()
	stopProc(proc)
	return fail(err)
}

func stopProc(p Process) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = p.Stop(ctx)
}

// announce saves new lists to the cache and tells the sharing sessions
// which lists changed since they last saw them, but for the kinds the
// upstream said changed ("tools", "prompts"), which they were told of
// already (see changed), even if flyd sees no difference: it may have
// been a change and its undoing.
func (in *instance) announce(old, l lists, had bool, users []Session, said map[string]bool) {
	same := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	toolsSame, promptsSame, tmplSame := same(old.Tools, l.Tools), same(old.Prompts, l.Prompts), same(old.Templates, l.Templates)
	if had && toolsSame && promptsSame && tmplSame {
		return
	}
	if c := in.m.cfg.Cache; c != nil {
		if b, err := json.Marshal(l); err == nil {
			if err := c.PutCache(cacheKey(in.srv.Name), b); err != nil {
				in.m.log.Warn("cache upstream lists", "upstream", in.srv.Name, "error", err)
			}
		}
	}
	for _, s := range users {
		if !toolsSame && !said["tools"] {
			s.Notify("notifications/tools/list_changed", &mcp.ToolListChangedParams{})
		}
		if !promptsSame && !said["prompts"] {
			s.Notify("notifications/prompts/list_changed", &mcp.PromptListChangedParams{})
		}
		if !tmplSame {
			s.Notify("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

// fetchLists reads every page of the upstream's tools, prompts and
// templates, for the capabilities it declared.
func fetchLists(ctx context.Context, cs *mcp.ClientSession, timeout time.Duration) (lists, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var l lists
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		return l, nil
	}
	if caps.Tools != nil {
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("tools/list: %w", err)
			}
			l.Tools = append(l.Tools, t)
		}
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("prompts/list: %w", err)
			}
			l.Prompts = append(l.Prompts, p)
		}
	}
	if caps.Resources != nil {
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("resources/templates/list: %w", err)
			}
			l.Templates = append(l.Templates, t)
		}
	}
	return l, nil
}

// changed is the upstream saying its list of kind ("tools", "prompts")
// changed: its sessions are told at once, and the lists are re-read by
// one refresher, which coalesces changes that come while it reads. Lists
// asked for meanwhile wait for it (see snapshot), so that a client told
// of a change never gets the lists it replaced.
func (in *instance) changed(kind string) {
	in.mu.Lock()
	if in.said == nil {
		in.said = map[string]bool{}
	}
	in.said[kind] = true
	start := in.fresh == nil
	if start {
		in.fresh = make(chan struct{})
	}
	users := slices.Collect(maps.Values(in.users))
	in.mu.Unlock()
	for _, s := range users {
		s.Notify("notifications/"+kind+"/list_changed", map[string]any{})
	}
	if start {
		in.bg.Go(in.refresh) // owned by supervise, which waits on bg
	}
}

// refresh re-reads the lists until no change the upstream announced is
// left unread, then lets waiting list calls go on. Announce tells the
// sessions of what changed that the upstream did not say (templates, say).
func (in *instance) refresh() {
	for {
		in.mu.Lock()
		said := in.said
		in.said = nil
		cs, old, had := in.cs, in.lists, in.listed
		users := slices.Collect(maps.Values(in.users))
		if len(said) == 0 || cs == nil {
			close(in.fresh)
			in.fresh = nil
			in.mu.Unlock()
			return
		}
		in.mu.Unlock()
		l, err := fetchLists(in.ctx, cs, in.srv.Timeout())
		if err != nil {
			in.m.log.Warn("upstream lists", "upstream", in.srv.Name, "error", err)
			continue // waiting lists go on with what flyd had, unless a change came meanwhile
		}
		in.mu.Lock()
		in.lists, in.listed = l.encoded(), true
		in.mu.Unlock()
		in.announce(old, l, had, users, said)
	}
}

// describe turns the end of the upstream into an error that names it and
// quotes the last lines of its stderr.
func (in *instance) describe(p Process, err error) error {
	select {
	case <-p.Done():
	case <-time.After(2 * time.Second):
	}
	msg := fmt.Sprintf("upstream %s (pid %d): %v", in.srv.Name, p.PID(), err)
	if tail := p.Tail(10); len(tail) > 0 {
		msg += "; the last lines of its log (logs://upstream/" + p.ID() + "):\n" + strings.Join(tail, "\n")
	}
	return errors.New(msg)
}

// session returns the live connection, starting or waiting for it. If
// the current attempt fails, the error says why.
func (in *instance) session(ctx context.Context) (*mcp.ClientSession, Process, error) {
	in.mu.Lock()
	cs, proc, up, ended := in.cs, in.proc, in.up, in.ended
	in.mu.Unlock()
	if cs != nil {
		return cs, proc, nil
	}
	select {
	case <-up:
		return in.session(ctx)
	case <-ended:
		in.mu.Lock()
		why := in.lastErr
		in.mu.Unlock()
		return nil, nil, fmt.Errorf("upstream %s is not running (flyd retries with backoff): %s", in.srv.Name, why)
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("upstream %s did not start in time: %w", in.srv.Name, ctx.Err())
	case <-in.done:
		return nil, nil, fmt.Errorf("upstream %s: %w", in.srv.Name, errClosed)
	}
}

var callSeq atomic.Uint64

// call runs fn on the live connection on behalf of s, bounded by the
// upstream's timeout. While it runs, s is the session that sampling and
// elicitation requests from the upstream go to. A connection lost
// mid-call turns into an error naming the upstream and quoting its
// stderr.
func (in *instance) call(ctx context.Context, s Session, fn func(context.Context, *mcp.ClientSession) error) error {
	return in.callAsking(ctx, s, nil, fn)
}

// callRec is a call in flight: whose, and, for a 2026-07-28 client's,
// how the upstream's requests for input reach it (see mrtr.go).
type callRec struct {
	session string
	owner   string          // see owner
	ask     askFunc         // nil: ask the session's client directly
	ctx     context.Context // the call's, which carries the client's request
}

// askFunc asks a client for input in the middle of its call.
type askFunc func(context.Context, mcp.InputRequest) (mcp.InputResponse, error)

// callAsking is call, with the upstream's requests for input going to
// ask when it is not nil.
func (in *instance) callAsking(ctx context.Context, s Session, ask askFunc, fn func(context.Context, *mcp.ClientSession) error) error {
	ctx, cancel := context.WithTimeout(ctx, in.srv.Timeout())
	defer cancel()
	cs, proc, err := in.session(ctx)
	if err != nil {
		return err
	}
	id := callSeq.Add(1)
	in.mu.Lock()
	in.calls[id] = callRec{session: s.ID(), owner: owner(s), ask: ask, ctx: ctx}
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.calls, id)
		in.mu.Unlock()
	}()
	err = fn(ctx, cs)
	var answer *jsonrpc.Error
	switch {
	case err == nil, errors.As(err, &answer):
		return err // the upstream's own answer
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("upstream %s did not answer within %s (its timeout_sec): %w", in.srv.Name, in.srv.Timeout(), err)
	case ctx.Err() != nil:
		return err
	}
	// The connection failed: if the process is dying, say so, with why.
	select {
	case <-proc.Done():
		return in.describe(proc, fmt.Errorf("exited during the call (%w)", err))
	case <-time.After(2 * time.Second):
		return fmt.Errorf("upstream %s: %w", in.srv.Name, err)
	}
}

// caller is the session of the only call in flight, if there is exactly
// one: the one a sampling or elicitation request belongs to; with how to
// ask its client when that is not a request of flyd's own (ask nil), and
// the call's context.
func (in *instance) caller() (Session, askFunc, context.Context, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ids := map[string]bool{}
	var rec callRec
	var newest uint64
	for id, c := range in.calls {
		ids[c.owner] = true
		if id >= newest { // the session's latest call: an earlier one its client gave up on may linger
			rec, newest = c, id
		}
	}
	if len(ids) != 1 {
		return nil, nil, nil, fmt.Errorf("flyd shares %s between sessions and cannot tell which one this request is for (%d have calls in flight)", in.srv.Name, len(ids))
	}
	if rec.ask != nil { // a relay's: it asks through the relay, whose client may be between requests
		return in.users[rec.session], rec.ask, rec.ctx, nil
	}
	if s := in.users[rec.session]; s != nil && s.MCP() != nil {
		return s, nil, rec.ctx, nil
	}
	return nil, nil, nil, errors.New("the calling session has gone")
}

// onCall returns a context for asking the client of a call whose context
// is call, in the middle of the upstream's request whose context is ctx:
// it carries call's values (the client's request, on whose stream the SDK
// sends a request that belongs to it: over Streamable HTTP, not the GET
// stream, which the client may not have opened) and ends with either.
func onCall(ctx, call context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(call)
	stop := context.AfterFunc(ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

func (in *instance) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Logger: in.m.log.With("upstream", in.srv.Name),
		// A 2026-07-28 upstream's requests for input go to flyd, which
		// answers them by the calling client's era (see exchange).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			s, ask, call, err := in.caller()
			if err != nil {
				return nil, err
			}
			if ask != nil {
				return asked[*mcp.CreateMessageResult](ask(ctx, req.Params))
			}
			ctx, done := onCall(ctx, call)
			defer done()
			return s.MCP().CreateMessage(ctx, req.Params)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s, ask, call, err := in.caller()
			if err != nil {
				return nil, err
			}
			if ask != nil {
				return asked[*mcp.ElicitResult](ask(ctx, req.Params))
			}
			ctx, done := onCall(ctx, call)
			defer done()
			return s.MCP().Elicit(ctx, req.Params)
		},
		// Refreshed off the connection's goroutine: the lists are requests
		// to the same upstream.
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { in.changed("tools") },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { in.changed("prompts") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			in.toUsers("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			in.mu.Lock()
			var to []Session
			for id := range in.subs[req.Params.URI] {
				if s := in.users[id]; s != nil {
					to = append(to, s)
				}
			}
			in.mu.Unlock()
			for _, s := range to {
				s.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI})
			}
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			in.mu.Lock()
			users := slices.Collect(maps.Values(in.users))
			in.mu.Unlock()
			p := *req.Params
			if p.Logger == "" {
				p.Logger = in.srv.Name
			}
			for _, s := range users {
				if ss := s.MCP(); ss != nil {
					_ = ss.Log(ctx, &p) // at the level the session set
				}
			}
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok := fmt.Sprint(req.Params.ProgressToken)
			in.mu.Lock()
			r, ok := in.progress[tok]
			s := in.users[r.session]
			in.mu.Unlock()
			if !ok || s == nil || (s.MCP() == nil && r.to == nil) {
				in.m.log.Debug("upstream progress for no live call", "upstream", in.srv.Name, "token", tok)
				return
			}
			p := *req.Params
			p.ProgressToken = r.token
			to, nctx := s.MCP(), ctx
			if r.to != nil {
				to, nctx = r.to, r.reqCtx
			}
			if err := to.NotifyProgress(nctx, &p); err != nil {
				in.m.log.Debug("progress not delivered", "upstream", in.srv.Name, "session", s.ID(), "error", err)
			}
		},
	}
}

// toUsers sends one notification to every sharing session.
func (in *instance) toUsers(method string, params any) {
	in.mu.Lock()
	users := slices.Collect(maps.Values(in.users))
	in.mu.Unlock()
	for _, s := range users {
		s.Notify(method, params)
	}
}

// withProgress routes the upstream's progress for one call back to the
// caller's token, and returns the token to send upstream and a function
// that ends the route.
func (in *instance) withProgress(ctx context.Context, s Session, token any) (any, func()) {
	if token == nil {
		return nil, func() {}
	}
	ours := fmt.Sprintf("fly-%d", callSeq.Add(1))
	route := progressRoute{session: s.ID(), token: token}
	if req := requestOf(ctx); req != nil {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			route.to, route.reqCtx = ss, context.WithoutCancel(ctx)
		}
	}
	in.mu.Lock()
	in.progress[ours] = route
	in.mu.Unlock()
	return ours, func() {
		// The go-sdk may hand flyd the upstream's last progress after the
		// call's result: keep routing it for a moment.
		time.AfterFunc(progressGrace, func() {
			in.mu.Lock()
			delete(in.progress, ours)
			in.mu.Unlock()
		})
	}
}

// subscribe adds s to the subscribers of uri, subscribing upstream only
// for the first one.
func (in *instance) subscribe(ctx context.Context, s Session, uri string) error {
	in.mu.Lock()
	first := len(in.subs[uri]) == 0
	in.mu.Unlock()
	if first {
		err := in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
			return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		})
		if err != nil {
			return err
		}
	}
	in.mu.Lock()
	if in.subs[uri] == nil {
		in.subs[uri] = map[string]bool{}
	}
	in.subs[uri][s.ID()] = true
	in.mu.Unlock()
	return nil
}

// unsubscribe removes s; the upstream is unsubscribed when s was the last.
func (in *instance) unsubscribe(ctx context.Context, s Session, uri string) error {
	in.mu.Lock()
	who := in.subs[uri]
	if !who[s.ID()] {
		in.mu.Unlock()
		return nil
	}
	delete(who, s.ID())
	last := len(who) == 0
	if last {
		delete(in.subs, uri)
	}
	in.mu.Unlock()
	if !last {
		return nil
	}
	return in.call(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
}

// snapshot returns the lists, waiting up to wait for the upstream when
// nothing is known yet (no cache): a new session's tools/list is answered
// from the cache while a stopped upstream starts in the background. While
// lists the upstream said changed are re-read, it waits for them too.
func (in *instance) snapshot(ctx context.Context, wait time.Duration) (lists, error) {
	return in.lookup(ctx, wait, true)
}

// find calls found with the lists, waiting for the upstream as a call
// does: with the current ones, and only if they lack what it looks for
// (it may be new) with those being re-read, if any.
func (in *instance) find(ctx context.Context, found func(lists) bool) error {
	for _, fresh := range []bool{false, true} {
		l, err := in.lookup(ctx, in.srv.Timeout(), fresh)
		if err != nil || found(l) {
			return err
		}
	}
	return nil
}

// lookup is snapshot, or snapshot without waiting for a re-read when
// fresh is false.
func (in *instance) lookup(ctx context.Context, wait time.Duration, fresh bool) (lists, error) {
	in.mu.Lock()
	l, listed, reading := in.lists, in.listed, in.fresh
	in.mu.Unlock()
	if listed && reading != nil && fresh {
		// The upstream said a list changed, and its clients were told at
		// once: they get the new lists, not the ones it replaced.
		t := time.NewTimer(min(wait, in.srv.Timeout()))
		defer t.Stop()
		select {
		case <-reading:
		case <-t.C:
		case <-ctx.Done():
		}
		in.mu.Lock()
		l = in.lists
		in.mu.Unlock()
	}
	if listed {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, min(wait, in.srv.Timeout()))
	defer cancel()
	if _, _, err := in.session(ctx); err != nil {
		return lists{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lists, nil
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
			st.LogURI = "logs://upstream/" + p.ID()
			st.Error = fmt.Sprintf("no answer to initialize after %s (flyd gives up at %s and restarts it)", time.Since(in.attempt).Round(time.Second), in.srv.Timeout())
			if tail := p.Tail(5); len(tail) > 0 {
				st.Error += "; the last lines of its log:\n" + strings.Join(tail, "\n")
			}
		}
	}
	if in.proc != nil && in.cs != nil {
		st.Protocol = in.cs.InitializeResult().ProtocolVersion
		st.PID = in.proc.PID()
		st.LogURI = "logs://upstream/" + in.proc.ID()
		st.RSSBytes, _ = rss(st.PID) // unknown: left out of the status
	}
	return st
}

func rootOf(dir string) *mcp.Root {
	u := url.URL{Scheme: "file", Path: dir}
	return &mcp.Root{URI: u.String(), Name: dir}
}
