package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// A run's process from its start to its end: supervise reads its output
// until it exits and records how it ended; stop ends it.

// cancelReason is why the call that owned a process (a build, a one-shot
// command, an upstream) ended it; see kindOptions.endsWithCall.
type cancelReason uint8

const (
	notCancelled      cancelReason = iota
	cancelledByClient              // the call's context was cancelled: the run ends cancelled
	timedOut                       // the call's deadline passed: the run fails
)

// String is the reason as the run's record gives it.
func (c cancelReason) String() string {
	switch c {
	case cancelledByClient:
		return "cancelled by the client"
	case timedOut:
		return "timed out"
	}
	return ""
}

// state is the state a run that was ended for c ends in.
func (c cancelReason) state() store.State {
	if c == cancelledByClient {
		return stateCancelled
	}
	return stateFailed
}

// cancel records why the call that owned the run ended it.
func (r *Run) cancel(why cancelReason) {
	r.mu.Lock()
	r.cancelled = why
	r.mu.Unlock()
}

// supervise reads the process's output until it exits, then records how
// it ended.
func (r *Run) supervise() {
	var readers sync.WaitGroup
	if !r.opts.callerSpeaks {
		readers.Go(func() { r.read(r.proc.stdout, logring.Stdout) })
	}
	readers.Go(func() { r.read(r.proc.stderr, logring.Stderr) })
	err := r.proc.wait(readers.Wait)
	r.finish(err, "")
}

// finish makes the record of a run whose process has exited final: how
// it ended, its errors, the outcome of a stop that was asked for; then
// every waiter is let go, and once its log is on disk the run leaves
// memory. interrupted, when not "", is why it ended interrupted (its
// holder was gone when flyd started) whatever its exit.
func (r *Run) finish(waitErr error, interrupted string) {
	r.vm.stop() // nothing writes to the log after the process
	if r.proc.held != nil {
		r.proc.waitedFor() // its group is its holder's to end: flyd's copy goes (Windows)
	}
	code, how := r.proc.exitCode(), r.proc.exitDescription(waitErr)
	var counts *store.ErrorCounts
	if r.errors != nil {
		st := r.errors.Stats()
		counts = &store.ErrorCounts{Total: st.Total, Distinct: st.Entries, Current: st.Current}
	}
	r.mu.Lock()
	r.rec.Errors = counts
	r.claim = nil
	r.rec.ExitCode = &code
	r.rec.EndedAt = time.Now()
	r.endStateLocked(code, how)
	if interrupted != "" {
		r.rec.State, r.rec.Error = stateInterrupted, interrupted
	}
	outcome := string(r.rec.State)
	if code >= 0 {
		outcome += fmt.Sprintf(" (exit code %d)", code)
	}
	r.stopEndedLocked(outcome)
	for id, ch := range r.pending {
		close(ch)
		delete(r.pending, id)
	}
	r.proc.closeInput()
	state := r.rec.State
	r.mu.Unlock()

	r.note(fmt.Sprintf("exited: %s, state %s", how, state))
	r.persist()
	onDisk := r.flushLog()
	r.ring.Close()
	r.closeStarted()
	close(r.done)
	if onDisk {
		r.eng.forget(r)
	}
	r.eng.log.Info("run ended", logRun, r.id, "state", state, "exit_code", code)
}

// endStateLocked sets the state the run ended in, and its error: stopped
// by a client, cancelled or timed out by the call that owned it, exited,
// or failed. r.mu is held.
func (r *Run) endStateLocked(code int, how string) {
	switch {
	case r.stopping:
		r.rec.State = stateStopped
	case r.cancelled != notCancelled:
		r.rec.State, r.rec.Error = r.cancelled.state(), r.cancelled.String()
	case code == 0:
		r.rec.State = stateExited
	default:
		r.rec.State = stateFailed
		if r.rec.Error == "" {
			r.rec.Error = how
		}
	}
}

// flushLog waits (5 s at most) until the run's log is on disk, then
// frees its seq mark: every line is stored. It reports whether the log
// is on disk.
func (r *Run) flushLog() bool {
	if r.eng.db == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.eng.db.Flush(ctx) != nil {
		return false
	}
	r.eng.marks.untrack(r.id)
	return true
}

// stop ends a live run: its kind's stop request (app.stop), then SIGTERM
// to its process group, then SIGKILL, each after a grace period (on
// Windows both signals end the run's job object at once: app.stop is the
// graceful step). Whatever the process did, every process left in its
// group is killed at the end. It waits for the exit.
func (r *Run) stop(ctx context.Context) error {
	if r.kind == store.KindApp {
		return r.stopApp(ctx, false) // an app flyd did not start is not flyd's to end: a detach
	}
	r.mu.Lock()
	if !r.live() {
		r.mu.Unlock()
		return nil
	}
	r.stopping = true
	appID := r.rec.AppID
	r.mu.Unlock()
	r.proc.hold() // its last signal comes after the leader's exit
	defer r.proc.unhold()
	r.note("stop requested")
	if r.askToStop(ctx, appID) {
		_ = r.proc.signal(proc.Kill) // leftovers of the group, and what left it
		return nil
	}
	_ = r.proc.signal(proc.Terminate)
	if !r.wait(ctx, r.eng.cfg.StopGrace) {
		r.forceStop(ctx)
	}
	_ = r.proc.signal(proc.Kill)
	if r.live() {
		return fmt.Errorf("run %s did not exit after SIGKILL", r.id)
	}
	return nil
}

// askToStop sends the kind's stop request to the app, if it has one and
// the app has started, and reports whether the process exited within
// the grace period after it.
func (r *Run) askToStop(ctx context.Context, appID string) bool {
	if appID == "" || r.opts.stopRequest == "" {
		return false
	}
	grace := r.eng.cfg.StopGrace
	rctx, cancel := context.WithTimeout(ctx, grace)
	_, err := r.request(rctx, r.opts.stopRequest, machineAppIDParams{AppID: appID})
	cancel()
	if errors.Is(err, errNoHolder) {
		return false // nobody can ask it: signals only
	}
	return r.wait(ctx, grace)
}

// forceStop ends a process that outlived SIGTERM: SIGKILL to its group,
// and if what is left is a process that left the run but holds its
// output open, the run stops reading that output.
func (r *Run) forceStop(ctx context.Context) {
	grace := r.eng.cfg.StopGrace
	if r.proc.alive() {
		r.note("still running after SIGTERM: killing the process group")
		_ = r.proc.signal(proc.Kill)
		r.wait(ctx, grace)
	}
	if r.live() && !r.proc.alive() {
		// The leader is gone, but a process that left the run (and
		// its mark) holds its output open: stop reading it.
		r.note("its output is held open by a process that left the run: closing it")
		r.proc.closeOutputs()
	}
	r.wait(ctx, 30*time.Second)
}

// wait waits up to d for the process to exit.
func (r *Run) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
