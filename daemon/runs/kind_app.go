package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/daemon/vmservice"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// An app fly did not start (an IDE's, a terminal's) becomes a run of kind
// app when an agent attaches to it: no process of flyd's, only the shared
// connection to its VM service, which brings its errors, its reloads (the
// services flutter_tools registered there) and the records of who did
// what, as for flyd's own runs. Detaching leaves the app running.

// attachedApp is an app flyd did not start: no process, no options of a
// process; what differs about it is written where it is used (stop is a
// detach, its end comes from its VM service).
var attachedApp = kindOptions{}

// appGoneAfter is how many dials in a row must find nobody before an
// attached app counts as ended.
const appGoneAfter = 3

// AttachSpec is an app to attach to.
type AttachSpec struct {
	Root         string // the workspace it belongs to
	VMServiceURI string // loopback only
	Name         string // shown as its argv
	By           *store.Actor
	Env          map[string]string // the attacher's environment: a flutter attach, if one is needed, runs with it
	// Max bounds the live apps of Root, flutter runs of flyd's and
	// attached apps together, this one included; 0 means no bound.
	Max int
}

// Attach makes the app at spec.VMServiceURI a run: it follows the app's
// VM service as for a debug run of flyd's own. A live run already
// attached to the same URI is returned instead.
func (e *Engine) Attach(spec AttachSpec) (*Run, error) {
	if _, err := vmservice.WebSocketURI(spec.VMServiceURI); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	for _, r := range e.liveLocked() {
		if r.kind == store.KindApp && r.rec.VMServiceURI == spec.VMServiceURI {
			e.mu.Unlock()
			return r, nil
		}
	}
	if spec.Max > 0 {
		live := e.liveIDsLocked(spec.Root, store.KindApp)
		if len(live)+e.reserved[limitKey(spec.Root, store.KindApp)] >= spec.Max {
			e.mu.Unlock()
			return nil, &LimitError{Kind: store.KindApp, Max: spec.Max, Live: live}
		}
	}
	id := store.NewRunID()
	r := &Run{
		id: id, kind: store.KindApp, opts: attachedApp, root: spec.Root, eng: e,
		ring:     logring.New(e.ringOptions()),
		pending:  make(map[int]chan machineMsg),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		detached: make(chan string, 1),
		markSlot: -1,
		vm:       vmFollower{ready: make(chan struct{})},
		errors:   apperrors.NewList(apperrors.Limits{}),
		scanner:  apperrors.NewScanner(apperrors.Project{Root: spec.Root, Package: packageName(spec.Root)}),
		mode:     "debug",
		env:      spec.Env,
		rec: store.Record{
			ID: id, Kind: store.KindApp, Argv: []string{"(attached)", spec.Name}, Root: spec.Root,
			State: stateRunning, StartedAt: time.Now(), StartedBy: spec.By, VMServiceURI: spec.VMServiceURI,
		},
	}
	close(r.started)
	r.markSlot = e.marks.track(id)
	e.runs[id] = r
	e.mu.Unlock()
	r.begin(fmt.Sprintf("attached to %s at %s (flyd did not start it: detaching leaves it running)", spec.Name, spec.VMServiceURI),
		spec.By, store.Action{What: "attach", Outcome: spec.VMServiceURI})
	e.wg.Add(1)
	go func() { // owned by the engine: ends when the app is detached or gone
		defer e.wg.Done()
		r.superviseApp()
	}()
	r.followVM(spec.VMServiceURI)
	return r, nil
}

// Why an attached run ends, as its follower or a client tells it.
const (
	endGone     = "gone"     // its VM service stopped answering
	endReplaced = "replaced" // another VM service answers at its address
	endDetached = "detached" // a client detached
)

// appGone is told by the follower that the attached app has ended: why
// is endGone or endReplaced.
func (r *Run) appGone(why string) {
	select {
	case r.detached <- why:
	default:
	}
}

// detach ends following the app, which keeps running.
func (r *Run) detach() {
	select {
	case r.detached <- endDetached:
	default:
	}
}

// superviseApp waits for the attached app's end or its detach, then
// makes the record final, as supervise does for a process.
func (r *Run) superviseApp() {
	why := <-r.detached
	r.vm.stop()
	r.mu.Lock()
	helper := r.helper
	r.mu.Unlock()
	if helper != nil { // its flutter attach goes with it
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = helper.stopDetach(ctx)
		cancel()
	}
	state, note := stateStopped, "detached: the app keeps running"
	switch why {
	case endGone:
		state, note = stateExited, "the app has ended (its VM service is gone)"
	case endReplaced:
		state, note = stateExited, "the app has ended: another VM service now answers at its address, and flyd does not follow it"
	}
	var counts *store.ErrorCounts
	if st := r.errors.Stats(); st.Total > 0 || st.Entries > 0 {
		counts = &store.ErrorCounts{Total: st.Total, Distinct: st.Entries, Current: st.Current}
	}
	r.mu.Lock()
	r.rec.State, r.rec.EndedAt, r.rec.Errors, r.claim = state, time.Now(), counts, nil
	r.stopEndedLocked(string(state))
	r.mu.Unlock()
	r.note(note)
	r.persist()
	r.flushLog()
	r.ring.Close()
	close(r.done)
	r.eng.forget(r)
	r.announce()
}

// stopApp ends an attached run: a detach, or with exitApp the app itself
// (ext.flutter.exit, then the detach once its VM service is gone).
func (r *Run) stopApp(ctx context.Context, exitApp bool) error {
	if exitApp {
		err := r.CallVM(ctx, "ext.flutter.exit", nil, 2*time.Second, nil)
		var ve *vmservice.Error
		if err != nil && !errors.As(err, &ve) { // the app may die before it answers
			if !errors.Is(err, vmservice.ErrClosed) {
				return fmt.Errorf("stop the app of run %s: %w", r.id, err)
			}
		}
		select {
		case <-r.done:
			return nil
		case <-time.After(r.eng.cfg.StopGrace):
		case <-ctx.Done():
		}
	}
	r.detach()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restartApp hot-reloads or restarts an attached app through the
// services flutter_tools registered on its VM service (s0.reloadSources,
// s0.hotRestart): flutter's own recompile and reload, for whoever asks.
func (r *Run) restartApp(ctx context.Context, full bool) (machineRestartResult, error) {
	service := "reloadSources"
	if full {
		service = "hotRestart"
	}
	method := r.ServiceMethod(service)
	if method == "" {
		return r.restartThroughAttach(ctx, full)
	}
	params := map[string]any{"pause": false}
	if !full {
		params["isolateId"] = r.Isolate()
		params["force"] = false
	}
	var res json.RawMessage
	err := r.CallVM(ctx, method, params, 0, &res)
	var ve *vmservice.Error
	switch {
	case errors.As(err, &ve) && ve.Code == vmservice.CodeMethodNotFound:
		return r.restartThroughAttach(ctx, full) // gone since the Service stream said otherwise
	case errors.As(err, &ve):
		return machineRestartResult{Code: 1, Message: ve.Message}, nil
	case err != nil:
		return machineRestartResult{}, err
	}
	return machineRestartResult{Code: 0, Message: what(full) + " through " + method}, nil
}
