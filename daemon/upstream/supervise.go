package upstream

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The lifecycle of an instance's process: start it, initialize it, serve
// until it ends, restart it with backoff; and the live connection that
// calls wait for.

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
		in.m.log.Warn("upstream down; restarting", "upstream", in.srv.Name, "scope", in.key.scope, "in", backoff, logkey.Error, err)
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
	in.mu.Lock()
	in.attempt = time.Now()
	in.mu.Unlock()
	proc, err := in.m.cfg.Start(in.ctx, in.srv, in.root, in.env)
	if err != nil {
		return in.endAttempt(fmt.Errorf("start upstream %s: %w", in.srv.Name, err))
	}
	in.setStarting(proc)
	defer in.setStarting(nil)
	client := mcp.NewClient(&mcp.Implementation{Name: "flyd", Title: "fly (shared for " + in.srv.Name + ")", Version: "1"}, in.clientOptions())
	cs, err := in.initialize(client, proc)
	if err != nil {
		return err
	}
	in.running(cs, client, proc)
	defer in.m.cfg.Changed()
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
	return in.endAttempt(err)
}

// endAttempt records why the current attempt ended, lets whoever waits
// for it go on (see session) with that error, and returns it.
func (in *instance) endAttempt(err error) error {
	in.mu.Lock()
	in.lastErr = err.Error()
	end := in.ended
	in.ended = make(chan struct{})
	in.mu.Unlock()
	close(end)
	return err
}

// setStarting records the process of the current attempt until it has
// initialized (nil: none).
func (in *instance) setStarting(p Process) {
	in.mu.Lock()
	in.starting = p
	in.mu.Unlock()
}

// initialize connects client to the started process and initializes it,
// at the protocol revision the instance offers. When that fails the
// process is stopped and the attempt ends, but for an upstream of the
// handshake era that failed at 2026-07-28: the error then wraps
// errRetryLegacy, and the next start, at once, is in that era.
func (in *instance) initialize(client *mcp.Client, proc Process) (*mcp.ClientSession, error) {
	stdin, stdout := proc.Stdio()
	in.mu.Lock()
	for r := range in.roots {
		client.AddRoots(rootOf(r))
	}
	in.mu.Unlock()
	offer := in.offer()
	ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
	cs, err := client.Connect(ctx, countingTransport{&mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: maxUpstreamLine}, in},
		&mcp.ClientSessionOptions{ProtocolVersion: offer})
	cancel()
	if err == nil {
		return cs, nil
	}
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
		in.m.log.Info("upstream failed at 2026-07-28: starting it again in the handshake era", "upstream", in.srv.Name, logkey.Error, err)
		return nil, fmt.Errorf("%w: %w", errRetryLegacy, err)
	}
	return nil, in.endAttempt(err)
}

// running makes the initialized connection the instance's: its logging
// level, its lists (announced to the sessions if they changed), its
// state, and every live subscription made again on it. Calls waiting
// for the upstream go on.
func (in *instance) running(cs *mcp.ClientSession, client *mcp.Client, proc Process) {
	if c := cs.InitializeResult().Capabilities; c != nil && c.Logging != nil && !modernConn(cs) {
		// Everything comes to flyd; each session gets what its own level
		// lets through.
		ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			in.m.log.Debug("upstream logging level", "upstream", in.srv.Name, logkey.Error, err)
		}
		cancel()
	}
	l, lerr := fetchLists(in.ctx, cs, in.srv.Timeout())
	if lerr != nil {
		in.m.log.Warn("upstream lists", "upstream", in.srv.Name, logkey.Error, lerr)
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
	if lerr == nil {
		in.announce(old, l, had, users, nil)
	}
	for _, uri := range subs {
		ctx, cancel := context.WithTimeout(in.ctx, in.srv.Timeout())
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			in.m.log.Warn("re-subscribe after restart", "upstream", in.srv.Name, "uri", uri, logkey.Error, err)
		}
		cancel()
	}
}

func stopProc(p Process) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = p.Stop(ctx)
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
		msg += "; the last lines of its log (" + wire.UpstreamLogURI(p.ID()) + "):\n" + strings.Join(tail, "\n")
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
