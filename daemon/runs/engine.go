package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// The engine: the registry of runs, opening and closing it, finding a
// run, and the limits per workspace.

// Engine owns every flutter process flyd starts, their log rings and
// their records. Processes live on the engine, not on the call that
// started them: close stops them all and waits for their goroutines.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	db    *store.DB
	marks *seqMarks // newest published seq of each live run; nil without a state dir

	// changed is told about every state change of a run, and logged about
	// new entries through the ring itself.
	changed func(r *Run)

	spawn     sync.RWMutex // Start holds it to read from a child's start to its registration; the reaper to write
	stopAdopt context.CancelFunc
	adoptDone chan struct{}

	resumable []store.Record    // runs Open found left to their holders, for Resume
	published map[string]uint64 // the newest seq the previous flyd published of each run, for Resume

	mu       sync.Mutex
	runs     map[string]*Run // in memory: live, and finished ones not yet on disk
	ended    []endedErrors   // the error lists of the runs that ended last, oldest first
	reserved map[string]int  // runs being started, by root and kind: they count against Spec.Max
	closed   bool
	wg       sync.WaitGroup // process, reader and notifier goroutines
}

func New(cfg Config, log *slog.Logger, changed func(*Run)) *Engine {
	return &Engine{cfg: cfg, log: log, changed: changed, runs: make(map[string]*Run), reserved: make(map[string]int)}
}

// Open attaches the store and, if marksPath is not "", the file of
// published seqs (see seqMarks). Runs left live by a daemon that died are
// marked interrupted and their process groups killed if they are still
// the same processes; they are never relaunched. Runs left to their
// holders are not: Resume takes them back.
func (e *Engine) Open(db *store.DB, marksPath string) error {
	e.db = db
	if e.cfg.Subreaper {
		e.startAdopting()
	}
	published := e.openMarks(marksPath)
	stale, held, err := db.MarkInterrupted(func(r store.Record) bool { return r.Holder != "" })
	if err != nil {
		return fmt.Errorf("mark interrupted runs: %w", err)
	}
	e.resumable, e.published = held, published
	for _, r := range stale {
		e.interrupted(r, published)
	}
	// The writer is not running yet: commit the notes now, before anyone
	// can read these logs (a read loads and keeps the run).
	if err := db.Flush(context.Background()); err != nil {
		return fmt.Errorf("record interrupted runs: %w", err)
	}
	return nil
}

// startAdopting starts the reaper of the descendants the runs orphan
// (see adopt).
func (e *Engine) startAdopting() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stopAdopt, e.adoptDone = cancel, make(chan struct{})
	go func() { // owned by the engine: Close stops it and waits
		defer close(e.adoptDone)
		e.adopt(ctx)
	}()
}

// openMarks opens the seq marks at path, if not "", and returns what the
// previous flyd left in them: the newest published seq of each run that
// was live.
func (e *Engine) openMarks(path string) map[string]uint64 {
	if path == "" {
		return nil
	}
	m, left, err := openSeqMarks(path)
	if err != nil {
		e.log.Warn("lines lost in a crash will not be counted exactly", logErr, err)
		return nil
	}
	e.marks = m
	return left
}

// interrupted ends the record of run r, which was live when the previous
// flyd died: what is left of its process group is killed, and its log
// says so and how many lines may be lost.
func (e *Engine) interrupted(r store.Record, published map[string]uint64) {
	note := "flyd restarted while this run was live: marked interrupted (never relaunched)"
	switch orphaned, err := orphanedGroup(r); {
	case err != nil:
		e.log.Warn("cannot tell whether the process group of an interrupted run is alive", logRun, r.ID, logPID, r.PID, logErr, err)
	case orphaned:
		e.log.Warn("killing the process group of an interrupted run", logRun, r.ID, logPID, r.PID)
		// As killTree, but through a leader only while it is still the
		// run's: its pid may have been given to another process since
		// orphanedGroup looked (on Windows, where no job of this flyd's
		// holds it, the group is its leader alone).
		_ = proc.SignalGroupIfStarted(r.PID, r.PIDStart, proc.Kill)
		for _, p := range proc.WithEnv(EnvMarker + "=" + r.ID) {
			_ = proc.SignalProcess(p, proc.Kill)
		}
		note += fmt.Sprintf("; its process group %d was still alive and was killed", r.PID)
	}
	// Entries published in the last commit window before the crash may
	// have reached followers without reaching the disk: continuing at
	// the last stored seq would hand their seqs out again, and a
	// follower resuming after one of them would skip this note. The
	// marks say exactly how far the run got; without them, jump far
	// enough that no seq can be reused.
	meta, _ := e.db.LogStats(r.ID)
	seq := meta.LastSeq + crashSeqJump
	if pub, ok := published[r.ID]; ok && pub >= meta.LastSeq {
		seq = pub + 1
		if lost := pub - meta.LastSeq; lost == 1 {
			note += "; the last line it printed was not stored in time"
		} else if lost > 1 {
			note += fmt.Sprintf("; the last %d lines it printed were not stored in time", lost)
		}
	} else {
		note += fmt.Sprintf("; lines it printed just before may be lost (up to %d: flyd could not tell how many)", crashSeqJump-1)
	}
	_ = e.db.Append(r.ID, store.Entry{Seq: seq, Time: time.Now(), Stream: string(logring.Fly), Text: note})
}

// orphanedGroup reports whether the process group of a run that was live
// when flyd died still has members of that run: its leader is the same
// process (pid and start time match) or gone, and the group is not. The kernel never hands out a pid that is still a process
// group's id, so a group whose leader died is still the run's; a leader
// pid now held by another process means the run's group is gone.
func orphanedGroup(r store.Record) (bool, error) {
	if r.PID <= 0 {
		return false, nil
	}
	start, err := proc.StartTime(r.PID)
	switch {
	case err != nil:
		return false, err
	case start != 0 && (r.PIDStart == 0 || start != r.PIDStart):
		return false, nil // the pid is another process's now
	}
	// The same leader, or none: whether anything of its group is left.
	// (On Windows a leader that has exited still has its start time while
	// a handle to it is open: its job says whether anything runs.)
	return proc.GroupAlive(r.PID)
}

// Close stops every live run (app.stop, SIGTERM, SIGKILL) that ends with
// flyd, records it as stopped, lets go of the runs their holders keep
// (they stay live, for the next flyd), and waits for every goroutine of
// the engine. Start fails with ErrClosed after it.
func (e *Engine) Close() { e.close(false) }

// CloseAll is Close for a flyd asked to stop with its runs: the runs
// their holders keep are stopped too.
func (e *Engine) CloseAll() { e.close(true) }

func (e *Engine) close(all bool) {
	e.mu.Lock()
	e.closed = true
	live := e.liveLocked()
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range live {
		if !all && r.kept() {
			wg.Go(r.letGo)
			continue
		}
		wg.Go(func() { _ = r.stop(context.Background()) })
	}
	wg.Wait()
	e.wg.Wait()
	if e.stopAdopt != nil {
		e.killOrphans()
		e.stopAdopt()
		<-e.adoptDone
		e.reapOrphans()
	}
	e.marks.close()
}

// Live returns the runs whose process has not ended, in no order.
func (e *Engine) Live() []*Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.liveLocked()
}

// Persisted reports whether the engine has a store: whether log entries
// the ring evicted can still be read.
func (e *Engine) Persisted() bool { return e.db != nil }

func (e *Engine) liveLocked() []*Run {
	var out []*Run
	for _, r := range e.runs {
		select {
		case <-r.done:
		default:
			out = append(out, r)
		}
	}
	return out
}

// forget drops a run that has ended from memory: the store has it now
// (and prunes it in its time), so memory holds live runs only, however
// many end. Its error list is kept a while longer (see keptErrors).
func (e *Engine) forget(r *Run) {
	e.mu.Lock()
	delete(e.runs, r.id)
	if r.errors != nil {
		e.ended = append(e.ended, endedErrors{id: r.id, list: r.errors})
		if n := len(e.ended) - maxEndedErrors; n > 0 {
			e.ended = slices.Delete(e.ended, 0, n)
		}
	}
	e.mu.Unlock()
}

// maxEndedErrors bounds the error lists of ended runs kept in memory (a
// list is at most apperrors' default 256 KiB): the store keeps a run's
// counts, not its list, and an agent asks what the app hit before it
// crashed of the runs that ended last.
const maxEndedErrors = 8

// endedErrors is the error list of a run that has ended.
type endedErrors struct {
	id   string
	list *apperrors.List
}

// keptErrors returns the error list of the ended run id, if still kept.
func (e *Engine) keptErrors(id string) *apperrors.List {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range e.ended {
		if k.id == id {
			return k.list
		}
	}
	return nil
}

// Get returns the run with id, loading a finished one from the store.
func (e *Engine) Get(id string) (*Run, error) {
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r != nil {
		return r, nil
	}
	if e.db == nil {
		return nil, fmt.Errorf("%w %q", ErrNoSuchRun, id)
	}
	rec, err := e.db.GetRun(id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w %q; list runs with runs_list", ErrNoSuchRun, id)
		}
		return nil, err
	}
	return e.load(rec)
}

// load makes a finished run from the store readable: its ring holds the
// newest persisted entries and continues their seq.
func (e *Engine) load(rec store.Record) (*Run, error) {
	entries, err := e.db.Tail(rec.ID, e.ringOptions().MaxEntries)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read log of run %s: %w", rec.ID, err)
	}
	meta, _ := e.db.LogStats(rec.ID)
	opts := e.ringOptions()
	opts.FirstSeq = meta.LastSeq
	ring, err := logring.Restore(opts, fromStore(entries))
	if err != nil {
		return nil, fmt.Errorf("restore log of run %s: %w", rec.ID, err)
	}
	ring.Close()
	r := &Run{id: rec.ID, kind: rec.Kind, opts: optionsOf(rec.Kind), root: rec.Root, ring: ring, eng: e, rec: rec, markSlot: -1,
		started: make(chan struct{}), done: make(chan struct{}), vm: vmFollower{ready: make(chan struct{}), done: true},
		errors: e.keptErrors(rec.ID)}
	close(r.started)
	close(r.done)
	r.vm.markReady()
	return r, nil // not kept: the store is where finished runs live
}

func fromStore(in []store.Entry) []logring.Entry {
	out := make([]logring.Entry, len(in))
	for i, e := range in {
		out[i] = logring.Entry{Seq: e.Seq, Time: e.Time, Stream: logring.Stream(e.Stream), Text: e.Text, Truncated: e.Truncated}
	}
	return out
}

func (e *Engine) ringOptions() logring.Options {
	return logring.Options{MaxEntries: e.cfg.RingEntries, MaxBytes: e.cfg.RingBytes, MaxLine: maxLine}
}

// List returns the runs of root ("" for every root), newest first: the
// live ones in memory and the finished ones in the store.
func (e *Engine) List(root string) ([]store.Record, error) {
	var recs []store.Record
	if e.db != nil {
		var err error
		if recs, err = e.db.Runs(); err != nil {
			return nil, err
		}
	}
	byID := make(map[string]int, len(recs))
	for i, r := range recs {
		byID[r.ID] = i
	}
	e.mu.Lock()
	for _, r := range e.runs {
		rec := r.record()
		if i, ok := byID[rec.ID]; ok {
			recs[i] = rec // the in-memory one is newest
		} else {
			recs = append(recs, rec)
		}
	}
	e.mu.Unlock()
	recs = slices.DeleteFunc(recs, func(r store.Record) bool { return root != "" && r.Root != root })
	slices.SortFunc(recs, func(a, b store.Record) int { return strings.Compare(b.ID, a.ID) })
	return recs, nil
}

// LiveIDs returns the ids of the live runs of kind in root, sorted.
func (e *Engine) LiveIDs(root string, kind store.Kind) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.liveIDsLocked(root, kind)
}

// liveIDsLocked returns the ids of the live runs of kind in root,
// sorted. e.mu must be held.
func (e *Engine) liveIDsLocked(root string, kind store.Kind) (ids []string) {
	for _, r := range e.liveLocked() {
		if r.root == root && sameLimit(r.kind, kind) {
			ids = append(ids, r.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// sameLimit reports whether runs of kinds a and b count against one
// limit: a flutter run of flyd's and an attached app are both a live app
// flyd follows, with its VM-service connection and its log.
func sameLimit(a, b store.Kind) bool {
	app := func(k store.Kind) bool { return k == store.KindRun || k == store.KindApp }
	return a == b || (app(a) && app(b))
}

// limitKey is the key of e.reserved for runs of kind in root.
func limitKey(root string, kind store.Kind) string {
	if kind == store.KindApp {
		kind = store.KindRun
	}
	return root + "\x00" + string(kind)
}

// LimitError is Start's error when Spec.Max live runs of the kind are
// already live (or starting) in the root.
type LimitError struct {
	Kind store.Kind
	Max  int
	Live []string // ids of the live runs, sorted
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%d %s runs are already live in this workspace (%s); the limit is %d", len(e.Live), e.Kind, strings.Join(e.Live, ", "), e.Max)
}

// A reservation holds the place of a run being started under its limit,
// from the check until the run is registered or has failed to start: the
// check and the start are one step, so concurrent Starts never exceed
// Spec.Max.
type reservation struct {
	key  string
	held bool // under e.mu
}

// reserve checks the limit of max live runs of kind in root (0: none)
// and holds a place under it. The caller registers the run or releases
// the place.
func (e *Engine) reserve(root string, kind store.Kind, max int) (*reservation, error) {
	key := limitKey(root, kind)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if max > 0 {
		live := e.liveIDsLocked(root, kind)
		if len(live)+e.reserved[key] >= max {
			return nil, &LimitError{Kind: kind, Max: max, Live: live}
		}
	}
	e.reserved[key]++
	return &reservation{key: key, held: true}, nil
}

// register makes r one of the engine's runs, in the place res held.
func (e *Engine) register(r *Run, res *reservation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[r.id] = r
	e.reserved[res.key]--
	res.held = false
}

// release gives res's place up, unless a run took it.
func (e *Engine) release(res *reservation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if res.held {
		e.reserved[res.key]--
		res.held = false
	}
}
