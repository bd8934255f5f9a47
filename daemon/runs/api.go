package runs

import (
	"context"

	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// ID is the run's id.
func (r *Run) ID() string { return r.id }

// Kind says what started the run.
func (r *Run) Kind() store.Kind { return r.kind }

// Root is the workspace root the run was started in.
func (r *Run) Root() string { return r.root }

// Ring is the run's log ring: subscribe with its Cursor or Wait. It is
// closed when the run's output ends.
func (r *Run) Ring() *logring.Ring { return r.ring }

// Record returns a copy of the run's record.
func (r *Run) Record() store.Record { return r.record() }

// Live reports whether the run's process has not ended.
func (r *Run) Live() bool { return r.live() }

// Started is closed at app.started, or when the process ends first.
func (r *Run) Started() <-chan struct{} { return r.started }

// Done is closed once the process has exited and its record is final.
func (r *Run) Done() <-chan struct{} { return r.done }

// Note adds flyd's own entry to the run's log.
func (r *Run) Note(text string) { r.note(text) }

// Stop ends a live run: app.stop, then SIGTERM to its process group, then
// SIGKILL, each after the grace period; every process left in the group
// is killed at the end. It waits for the exit. A run that has ended is
// not an error.
func (r *Run) Stop(ctx context.Context) error { return r.stop(ctx) }

// SetProgress sets the function told of the run's progress messages
// (what a waiting tool call reports), or clears it with nil.
func (r *Run) SetProgress(f func(message string)) {
	r.mu.Lock()
	r.progress = f
	r.mu.Unlock()
}

// StoredSeq is the newest seq of the run's log that is on disk, and
// whether the engine has a store.
func (r *Run) StoredSeq() (uint64, bool) {
	if r.eng.db == nil {
		return 0, false
	}
	st, err := r.eng.db.LogStats(r.id)
	if err != nil {
		return 0, false
	}
	return st.LastSeq, true
}

// Tail returns the text of the newest n entries of the log, oldest first.
func (r *Run) Tail(n int) []string {
	var out []string
	for _, e := range r.ring.Tail(n) {
		out = append(out, e.Text)
	}
	return out
}
