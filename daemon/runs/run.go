package runs

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// Run is one flutter process (or an app flyd attached to, or a finished
// run loaded from the store).
type Run struct {
	id   string
	kind store.Kind
	opts kindOptions // what its kind does differently
	root string
	ring *logring.Ring
	eng  *Engine
	proc *process // its process; nil for an attached app and a run loaded from the store

	mu        sync.Mutex
	rec       store.Record
	nextReq   int
	pending   map[int]chan machineMsg
	markSlot  int // in the engine's seqMarks; -1 if none
	stopping  bool
	cancelled cancelReason         // why the call that owned it ended it, if it did
	progress  func(message string) // reports a waiting tool call's progress; nil when nobody waits

	started  chan struct{}     // closed at app.started, or when the process ends
	detached chan string       // an attached app's end: "detached" or "gone"; nil for the others
	env      map[string]string // an attached app's attacher's environment, for its flutter attach
	helper   *Run              // an attached app's flutter attach, once one was needed; under mu
	done     chan struct{}     // closed once the process has exited and its record is final

	mode    string             // debug, profile or release, from app.start; under mu
	errors  *apperrors.List    // the app's framework errors; nil for anything but a `flutter run`
	scanner *apperrors.Scanner // finds errors in the app's text output; owned by the stdout reader
	vm      vmFollower         // the app's VM-service connection, while it runs
	vmState vmState            // what the connection learnt: the UI isolate, the services registered

	journal []Action // what clients did to it, newest last; under mu
	actSeq  uint64
	claim   *Claim
	spent   *spentClaim       // the last claim that ran out at the end of its life
	heard   map[string]uint64 // by session handle, the newest action it was told of (NewsFor)

	// quietBefore: the app's errors from before it (the VM service's
	// history, taken again by a flyd that took the run back) are in the
	// log already: they go to the error list only.
	quietBefore time.Time

	// gmu orders the run's entries into the store (see appendAt); group
	// is the open group of its holder's reader, nil when none is open.
	gmu   sync.Mutex
	group []store.Entry

	reloads       reloads
	frames        frameSignal
	stderrCapture atomic.Pointer[lineCapture] // set while a reload waits for flutter's answer
}

// persist queues the record for the store's writer (never a disk write
// on the goroutine that reads the child's output) and tells the server.
func (r *Run) persist() {
	r.save()
	r.announce()
}

// save queues the record for the store's writer.
func (r *Run) save() {
	if r.eng.db != nil {
		if err := r.eng.db.QueueRun(r.record()); err != nil {
			r.eng.log.Warn("save run record", logRun, r.id, logErr, err)
		}
	}
}

// announce tells the engine's owner that the run changed.
func (r *Run) announce() {
	if r.eng.changed != nil {
		r.eng.changed(r)
	}
}

// record returns a copy of the run's record, with its journal, claim and
// news cursors.
func (r *Run) record() store.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	rec.Argv = slices.Clone(rec.Argv)
	rec.Journal = nil
	for _, a := range r.journal {
		rec.Journal = append(rec.Journal, store.JournalEntry{Seq: a.Seq, Action: a.Action})
	}
	rec.Claim = nil
	if c := r.claim; c != nil {
		rec.Claim = &store.ClaimRecord{By: c.By, Note: c.Note, Since: c.Since, Until: c.Until}
	}
	rec.Heard = maps.Clone(r.heard)
	return rec
}

func (r *Run) live() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *Run) closeStarted() {
	select {
	case <-r.started:
	default:
		close(r.started)
	}
}
