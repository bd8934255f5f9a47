// Package runs owns the flutter processes flyd starts (flutter run
// --machine, flutter build, one-shot commands): their process groups, the
// --machine protocol, their log rings, their records and persisted logs in
// the store, limits per workspace, and what happens to them when flyd
// stops or crashes. It speaks flutter, not MCP: it does not import the
// go-sdk or the daemon, and nothing outside it takes its locks or reads
// its runs from the store.
package runs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// Run states, from store.
const (
	stateStarting    = store.StateStarting
	stateRunning     = store.StateRunning
	stateStopped     = store.StateStopped
	stateExited      = store.StateExited
	stateFailed      = store.StateFailed
	stateInterrupted = store.StateInterrupted
	stateCancelled   = store.StateCancelled
)

// Log attribute keys of the runs engine.
const (
	logRun  = "run"
	logKind = "kind"
	logPID  = "pid"
)

// crashSeqJump is how far past its last stored seq an interrupted run's
// log continues after a crash when the seq marks cannot say how far it got
// (see seqMarks). It exceeds what can be published without being stored
// (the store's default queue of 8192 plus one batch of 256), so no seq is
// reused; readers see the jump as one gap, and the note says "up to".
const crashSeqJump = 1 << 14

// maxLine is the longest output line kept whole; longer ones are cut and
// flagged, and the rest of the line is skipped without being buffered.
const maxLine = 8 << 10

// Errors a caller may branch on.
var (
	ErrNoFlutter  = errors.New("flutter not found")
	ErrRunEnded   = errors.New("the run has ended")
	ErrNoSuchRun  = errors.New("no such run")
	ErrNotStarted = errors.New("the app has not started yet")
	ErrClosed     = errors.New("flyd is shutting down")
)

// Config is what the engine is told at start. Zero values mean the
// defaults of flyd's flags.
type Config struct {
	Flutter     string        // the flutter executable; default: "flutter" on each session's PATH
	StopGrace   time.Duration // wait after app.stop and after SIGTERM (default 5s)
	RingEntries int           // log ring bound per run, entries (default 1000)
	RingBytes   int           // log ring bound per run, bytes of text (default 100 KiB)
	// Subreaper makes the engine adopt the descendants its runs orphan
	// (Linux), reap them, and kill what is left of them at Close. For a
	// daemon: it changes the whole process, and reaps every child that
	// is not a run's leader.
	Subreaper bool
}

const logErr = "error"

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

	mu       sync.Mutex
	runs     map[string]*Run // in memory: live, and finished ones not yet on disk
	reserved map[string]int  // runs being started, by root and kind: they count against Spec.Max
	closed   bool
	wg       sync.WaitGroup // process, reader and notifier goroutines
}

// run is one flutter process (or a finished one loaded from the store).
type Run struct {
	id   string
	kind store.Kind
	root string
	ring *logring.Ring
	eng  *Engine

	mu        sync.Mutex
	rec       store.Record
	stdin     io.WriteCloser // nil unless a live `flutter run` or upstream
	stdout    io.ReadCloser  // an upstream's: read by its MCP client, not the engine
	nextReq   int
	pending   map[int]chan machineMsg
	markSlot  int // in the engine's seqMarks; -1 if none
	stopping  bool
	cancelled string               // why the call that owned a build ended it; "" if it did not
	progress  func(message string) // reports a waiting tool call's progress; nil when nobody waits
	outputs   []io.Closer          // the read ends of its stdout and stderr

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
	spent   *spentClaim // the last claim that ran out at the end of its life

	reloads       reloads
	frames        frameSignal
	stderrCapture atomic.Pointer[lineCapture] // set while a reload waits for flutter's answer
}

func New(cfg Config, log *slog.Logger, changed func(*Run)) *Engine {
	return &Engine{cfg: cfg, log: log, changed: changed, runs: make(map[string]*Run), reserved: make(map[string]int)}
}

// Open attaches the store and, if marksPath is not "", the file of
// published seqs (see seqMarks). Runs left live by a daemon that died are
// marked interrupted and their process groups killed if they are still
// the same processes; they are never relaunched.
func (e *Engine) Open(db *store.DB, marksPath string) error {
	e.db = db
	if e.cfg.Subreaper {
		ctx, cancel := context.WithCancel(context.Background())
		e.stopAdopt, e.adoptDone = cancel, make(chan struct{})
		go func() { // owned by the engine: Close stops it and waits
			defer close(e.adoptDone)
			e.adopt(ctx)
		}()
	}
	var published map[string]uint64
	if marksPath != "" {
		m, left, err := openSeqMarks(marksPath)
		if err != nil {
			e.log.Warn("lines lost in a crash will not be counted exactly", logErr, err)
		} else {
			e.marks, published = m, left
		}
	}
	stale, err := db.MarkInterrupted()
	if err != nil {
		return fmt.Errorf("mark interrupted runs: %w", err)
	}
	for _, r := range stale {
		note := "flyd restarted while this run was live: marked interrupted (never relaunched)"
		if orphanedGroup(r) {
			e.log.Warn("killing the process group of an interrupted run", logRun, r.ID, logPID, r.PID)
			_ = killTree(r.PID, r.ID, syscall.SIGKILL)
			note += fmt.Sprintf("; its process group %d was still alive and was killed", r.PID)
		}
		// Entries published in the last commit window before the crash may
		// have reached followers without reaching the disk: continuing at
		// the last stored seq would hand their seqs out again, and a
		// follower resuming after one of them would skip this note. The
		// marks say exactly how far the run got; without them, jump far
		// enough that no seq can be reused.
		meta, _ := db.LogStats(r.ID)
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
		_ = db.Append(r.ID, store.Entry{Seq: seq, Time: time.Now(), Stream: string(logring.Fly), Text: note})
	}
	// The writer is not running yet: commit the notes now, before anyone
	// can read these logs (a read loads and keeps the run).
	if err := db.Flush(context.Background()); err != nil {
		return fmt.Errorf("record interrupted runs: %w", err)
	}
	return nil
}

// orphanedGroup reports whether the process group of a run that was live
// when flyd died still has members of that run: its leader is the same
// process (pid and start time match), or its leader is gone but the group
// is not. The kernel never hands out a pid that is still a process
// group's id, so a group whose leader died is still the run's; a leader
// pid now held by another process means the run's group is gone.
func orphanedGroup(r store.Record) bool {
	if r.PID <= 0 {
		return false
	}
	switch start := processStart(r.PID); {
	case start != 0:
		return r.PIDStart != 0 && start == r.PIDStart
	default:
		return groupAlive(r.PID)
	}
}

// Close stops every live run (app.stop, SIGTERM, SIGKILL), records it
// as stopped, and waits for every goroutine of the engine. Start fails
// with ErrClosed after it.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	live := e.liveLocked()
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range live {
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
	r := &Run{id: rec.ID, kind: rec.Kind, root: rec.Root, ring: ring, eng: e, rec: rec, markSlot: -1,
		started: make(chan struct{}), done: make(chan struct{}), vm: vmFollower{ready: make(chan struct{}), done: true}}
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

// findFlutter resolves the flutter executable: --flutter, else the first
// "flutter" on the session's PATH (not flyd's: the editor's environment is
// the one the user set up).
func (e *Engine) findFlutter(env map[string]string) (string, error) {
	if e.cfg.Flutter != "" {
		return e.cfg.Flutter, nil
	}
	if len(env) == 0 {
		// A session that sent no environment (an HTTP client, an old
		// shim) runs with flyd's, as runEnv does.
		env = map[string]string{"PATH": os.Getenv("PATH"), "FLUTTER_ROOT": os.Getenv("FLUTTER_ROOT")}
	}
	path := env["PATH"]
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, "flutter")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	if root := env["FLUTTER_ROOT"]; root != "" {
		p := filepath.Join(root, "bin", "flutter")
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w on this session's PATH (%s): install Flutter (https://docs.flutter.dev/get-started/install) "+
		"and put its bin directory on the PATH your editor starts flyctl with, or set FLUTTER_ROOT, or start flyd with --flutter /path/to/flutter", ErrNoFlutter, path)
}

// Spec is what a run is started with.
type Spec struct {
	Kind store.Kind
	Root string
	Env  map[string]string // the client's environment; see runEnv
	Args []string          // after the flutter executable
	// Max bounds the live runs of Kind in Root, this one included; 0 means
	// no bound. The check and the start are one step: concurrent Starts
	// never exceed it.
	Max int
	// Command replaces flutter (an upstream MCP server). Its stdin and
	// stdout are the caller's (Run.Stdio); its stderr is the log.
	Command string
	Name    string // shown as Argv[0] instead of Command's path
	// By is the client that starts it, recorded as its first action.
	By *store.Actor
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

// Start launches flutter in its own process group, in spec.Root, with the
// client's environment (see runEnv). The process belongs to the engine:
// ctx only bounds a build or one-shot command (its cancellation kills the
// group), never a run.
func (e *Engine) Start(ctx context.Context, spec Spec) (*Run, error) {
	if n := argvBytes(spec.Args); n > maxArgvBytes {
		return nil, fmt.Errorf("the arguments are %d bytes; at most %d are kept with a run: pass large defines with --dart-define-from-file", n, maxArgvBytes)
	}
	flutter, name := spec.Command, spec.Name
	if flutter == "" {
		var err error
		if flutter, err = e.findFlutter(spec.Env); err != nil {
			return nil, err
		}
		name = "flutter"
	} else if name == "" {
		name = flutter
	}
	key := limitKey(spec.Root, spec.Kind)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if spec.Max > 0 {
		live := e.liveIDsLocked(spec.Root, spec.Kind)
		if len(live)+e.reserved[key] >= spec.Max {
			e.mu.Unlock()
			return nil, &LimitError{Kind: spec.Kind, Max: spec.Max, Live: live}
		}
	}
	e.reserved[key]++ // until the run is in e.runs, or failed to start
	e.mu.Unlock()
	inserted := false
	defer func() {
		if !inserted {
			e.mu.Lock()
			e.reserved[key]--
			e.mu.Unlock()
		}
	}()
	id := store.NewRunID()
	opts := e.ringOptions()
	r := &Run{
		errors: newErrorList(spec),
		id:     id, kind: spec.Kind, root: spec.Root, eng: e,
		ring:     logring.New(opts),
		pending:  make(map[int]chan machineMsg),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		vm:       vmFollower{ready: make(chan struct{})},
		markSlot: -1,
		rec: store.Record{
			ID: id, Kind: spec.Kind, Argv: append([]string{name}, spec.Args...), Root: spec.Root,
			State: stateStarting, StartedAt: time.Now(), StartedBy: spec.By,
		},
	}
	if r.errors != nil {
		r.scanner = apperrors.NewScanner(apperrors.Project{Root: spec.Root, Package: packageName(spec.Root)})
	}
	cmd := exec.Command(flutter, spec.Args...)
	if spec.Kind != store.KindRun && spec.Kind != store.KindAttach {
		// A build or one-shot command dies with its call.
		cmd = exec.CommandContext(ctx, flutter, spec.Args...)
		cmd.Cancel = func() error {
			why := "cancelled by the client"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "timed out"
			}
			r.mu.Lock()
			r.cancelled = why
			r.mu.Unlock()
			return killTree(cmd.Process.Pid, id, syscall.SIGKILL)
		}
	}
	cmd.Dir = spec.Root
	cmd.Env = append(runEnv(spec.Env), EnvMarker+"="+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr io.Reader
	var stderrW *os.File
	if spec.Kind == store.KindUpstream {
		// Not StderrPipe: Wait would close it as soon as the leader exits,
		// losing the last lines, the ones that say why it died.
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		stderr, stderrW, cmd.Stderr = pr, pw, pw
	} else if stderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	if spec.Kind == store.KindRun || spec.Kind == store.KindUpstream || spec.Kind == store.KindAttach {
		if r.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	r.outputs = []io.Closer{stdout, stderr.(io.Closer)}
	if spec.Kind == store.KindUpstream {
		r.stdout, stdout = stdout, nil
	}
	e.spawn.RLock() // until the child is a run: the reaper must not wait for it
	err = cmd.Start()
	if stderrW != nil {
		stderrW.Close() // the child has its copy
		if err != nil {
			stderr.(io.Closer).Close()
		}
	}
	if err != nil {
		e.spawn.RUnlock()
		return nil, fmt.Errorf("start %s: %w", flutter, err)
	}
	pid := cmd.Process.Pid
	r.rec.PID, r.rec.PIDStart = pid, processStart(pid)
	r.markSlot = e.marks.track(id)
	e.mu.Lock()
	e.runs[id] = r
	e.reserved[key]--
	inserted = true
	e.mu.Unlock()
	e.spawn.RUnlock()
	r.note(fmt.Sprintf("started: %s (pid %d) in %s", strings.Join(r.rec.Argv, " "), pid, spec.Root))
	// On disk before Start returns, on the caller's goroutine: if flyd
	// dies, the next one must find the run to kill its process group.
	if e.db != nil {
		if err := e.db.PutRun(r.record()); err != nil {
			e.log.Warn("save run record", logRun, id, logErr, err)
		}
	}
	if spec.By != nil {
		r.logAction(store.Action{What: "start", By: *spec.By, Outcome: "pid " + strconv.Itoa(pid)})
	}
	r.announce()
	e.log.Info("run started", logRun, id, logKind, spec.Kind, logPID, pid, "root", spec.Root)

	e.wg.Add(1)
	go func() { // owned by the engine: ends when the process has exited
		defer e.wg.Done()
		r.supervise(cmd, stdout, stderr)
	}()
	return r, nil
}

// maxArgvBytes bounds a run's arguments: they are a client's to choose,
// and every record keeps them, which status and the dashboard show.
const maxArgvBytes = 64 << 10

func argvBytes(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	return n
}

// runEnv is the environment of a session's child: exactly the client's
// (the editor's, as its shim sent it), not flyd's, whose variables come
// from whichever client happened to start it. flyd's own FLY_* settings
// (FLY_SOCKET, FLY_STATE_DIR) are left out. A session that sent no environment (an old shim, a bare
// WebSocket client) gets flyd's.
func runEnv(env map[string]string) []string {
	if len(env) == 0 {
		env = make(map[string]string)
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == flypaths.EnvSocket || k == flypaths.EnvStateDir || k == flypaths.EnvConfigDir || k == EnvMarker {
			continue // flyd's own; a child that runs flyctl finds flyd by the defaults
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// supervise reads the process's output until it exits, then records how
// it ended.
func (r *Run) supervise(cmd *exec.Cmd, stdout, stderr io.Reader) {
	var readers sync.WaitGroup
	if stdout != nil {
		readers.Go(func() { r.read(stdout, logring.Stdout) })
	}
	readers.Go(func() { r.read(stderr, logring.Stderr) })
	var err error
	if r.kind == store.KindUpstream {
		// An upstream ends with its leader: what it started (an analysis
		// server) goes with it, and only then is its stderr complete.
		err = cmd.Wait()
		_ = killTree(cmd.Process.Pid, r.id, syscall.SIGKILL)
		readers.Wait()
		stderr.(io.Closer).Close()
	} else {
		readers.Wait()
		err = cmd.Wait()
	}
	r.vm.stop() // nothing writes to the log after the process

	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
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
	switch {
	case r.stopping:
		r.rec.State = stateStopped
	case r.cancelled == "cancelled by the client":
		r.rec.State = stateCancelled
		r.rec.Error = r.cancelled
	case r.cancelled != "":
		r.rec.State = stateFailed
		r.rec.Error = r.cancelled
	case code == 0:
		r.rec.State = stateExited
	default:
		r.rec.State = stateFailed
		if r.rec.Error == "" {
			r.rec.Error = exitDescription(cmd.ProcessState, err)
		}
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
	if r.stdin != nil {
		r.stdin.Close()
	}
	state := r.rec.State
	r.mu.Unlock()

	r.note(fmt.Sprintf("exited: %s, state %s", exitDescription(cmd.ProcessState, err), state))
	r.persist()
	onDisk := false
	if r.eng.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if r.eng.db.Flush(ctx) == nil {
			r.eng.marks.untrack(r.id) // every line is on disk
			onDisk = true
		}
		cancel()
	}
	r.ring.Close()
	r.closeStarted()
	close(r.done)
	if onDisk {
		// The store has it now (and prunes it in its time): memory holds
		// live runs only, however many end.
		r.eng.mu.Lock()
		delete(r.eng.runs, r.id)
		r.eng.mu.Unlock()
	}
	r.eng.log.Info("run ended", logRun, r.id, "state", state, "exit_code", code)
}

func exitDescription(ps *os.ProcessState, err error) string {
	if ps == nil {
		if err != nil {
			return err.Error()
		}
		return "unknown exit"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}

func (r *Run) closeStarted() {
	select {
	case <-r.started:
	default:
		close(r.started)
	}
}

// read turns one output stream into log entries, parsing --machine lines
// on stdout. It never blocks on readers or disk: the ring takes every
// line and the store queues it.
func (r *Run) read(rd io.Reader, stream logring.Stream) {
	br := bufio.NewReaderSize(rd, 2*maxLine)
	for {
		line, cut, err := readLine(br)
		if len(line) > 0 || (err == nil && !cut) {
			r.handleLine(line, stream, cut)
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line without its newline, at most maxLine
// bytes; cut says the rest was skipped. A whole line is br's buffer,
// valid until the next read: handleLine copies what it keeps.
func readLine(br *bufio.Reader) (line []byte, cut bool, err error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = bytes.Clone(b[:maxLine])
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		return line, true, err
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) > maxLine {
		return b[:maxLine], true, err
	}
	return b, false, err
}

func (r *Run) handleLine(line []byte, stream logring.Stream, cut bool) {
	if stream == logring.Stdout && (r.kind == store.KindRun || r.kind == store.KindAttach) && !cut {
		if p, ok := parseAppLog(line); ok {
			r.appLog(p)
			return
		}
		if m, ok := parseMachineLine(line); ok {
			r.handleMachine(m)
			return
		}
	}
	text := string(line)
	if cut {
		text += " …"
	}
	r.append(stream, text)
	if stream == logring.Stdout {
		r.report(text)
	}
}

// append adds one entry to the ring and queues it for the store.
func (r *Run) append(stream logring.Stream, text string) {
	if stream == logring.Stderr {
		if c := r.stderrCapture.Load(); c != nil {
			c.add(text)
		}
	}
	e := r.ring.Append(stream, text)
	if e.Seq == 0 || r.eng.db == nil {
		return
	}
	r.eng.marks.set(r.markSlot, e.Seq)
	_ = r.eng.db.Append(r.id, store.Entry{Seq: e.Seq, Time: e.Time, Stream: string(e.Stream), Text: e.Text, Truncated: e.Truncated})
}

// note is flyd's own entry in the run's log.
func (r *Run) note(text string) { r.append(logring.Fly, text) }

// report forwards progress to the tool call waiting on this run, if any.
func (r *Run) report(message string) {
	r.mu.Lock()
	p := r.progress
	r.mu.Unlock()
	if p != nil && message != "" {
		p(message)
	}
}

// handleMachine applies one --machine message to the run.
func (r *Run) handleMachine(m machineMsg) {
	if m.Event == "" && m.Method == "" { // a response to flyd
		if id, ok := m.intID(); ok {
			r.mu.Lock()
			ch := r.pending[id]
			delete(r.pending, id)
			r.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
		return
	}
	if m.Method != "" { // a request from flutter: app.exposeUrl is echoed back
		if p, err := machineParams[machineExposeURLParams](m); err == nil && m.Method == machineAppExposeURL {
			r.writeStdin(machineResponse(m.ID, map[string]string{"url": p.URL}))
		}
		return
	}
	changed := false
	switch m.Event {
	case machineAppLog:
		if p, err := machineParams[machineAppLogParams](m); err == nil {
			r.appLog(p)
			return
		}
	case machineAppStart:
		if p, err := machineParams[machineAppStartParams](m); err == nil {
			r.mu.Lock()
			r.rec.AppID = p.AppID
			r.mode = p.Mode
			r.mu.Unlock()
			changed = true
		}
	case machineAppDebugPort:
		if p, err := machineParams[machineDebugPortParams](m); err == nil {
			r.mu.Lock()
			r.rec.VMServiceURI = p.WSURI
			r.mu.Unlock()
			r.followVM(p.WSURI)
			changed = true
		}
	case machineAppDTD:
		if p, err := machineParams[machineDTDParams](m); err == nil {
			r.mu.Lock()
			r.rec.DTDURI = p.URI
			r.mu.Unlock()
			changed = true
		}
	case machineAppStarted:
		r.mu.Lock()
		r.rec.State = stateRunning
		r.mu.Unlock()
		r.closeStarted()
		changed = true
	case machineAppProgress:
		if p, err := machineParams[machineProgressParams](m); err == nil && !p.Finished {
			r.report(p.Message)
		}
	case machineAppStop:
		if p, err := machineParams[machineAppStopParams](m); err == nil && p.Error != "" {
			r.mu.Lock()
			r.rec.Error = string(p.Error)
			r.mu.Unlock()
			r.append(logring.Stderr, string(p.Error))
		}
	}
	r.append(logring.Event, eventText(m))
	if changed {
		r.persist()
	}
}

// appLog adds the app's output of an app.log event to the log.
func (r *Run) appLog(p machineAppLogParams) {
	stream := logring.Stdout
	if p.Error {
		stream = logring.Stderr
	}
	r.append(stream, p.Log)
	if p.StackTrace != "" {
		r.append(stream, p.StackTrace)
	}
	if r.scanner != nil {
		for _, e := range r.scanner.Text(p.Log, p.Error, p.StackTrace) {
			r.addError(e, time.Now(), false)
		}
	}
}

// eventText is the log line of a --machine event: its name and params.
func eventText(m machineMsg) string {
	if len(m.Params) == 0 {
		return m.Event
	}
	return m.Event + " " + string(m.Params)
}

// persist queues the record for the store's writer (never a disk write
// on the goroutine that reads the child's output) and tells the server.
func (r *Run) persist() {
	rec := r.record()
	if r.eng.db != nil {
		if err := r.eng.db.QueueRun(rec); err != nil {
			r.eng.log.Warn("save run record", logRun, r.id, logErr, err)
		}
	}
	r.announce()
}

// announce tells the engine's owner that the run changed.
func (r *Run) announce() {
	if r.eng.changed != nil {
		r.eng.changed(r)
	}
}

// record returns a copy of the run's record.
func (r *Run) record() store.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	rec.Argv = slices.Clone(rec.Argv)
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

func (r *Run) writeStdin(b []byte) error {
	r.mu.Lock()
	w := r.stdin
	r.mu.Unlock()
	if w == nil {
		return ErrRunEnded
	}
	_, err := w.Write(b)
	return err
}

// request sends a --machine request to the app and waits for its reply.
func (r *Run) request(ctx context.Context, method string, params any) (machineMsg, error) {
	r.mu.Lock()
	if r.stdin == nil || !r.live() {
		r.mu.Unlock()
		return machineMsg{}, ErrRunEnded
	}
	r.nextReq++
	id := r.nextReq
	ch := make(chan machineMsg, 1)
	r.pending[id] = ch
	r.mu.Unlock()
	if err := r.writeStdin(machineRequest(id, method, params)); err != nil {
		return machineMsg{}, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return machineMsg{}, ErrRunEnded
		}
		return m, nil
	case <-ctx.Done():
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
		return machineMsg{}, ctx.Err()
	}
}

// stop ends a live run: app.stop, then SIGTERM to its process group, then
// SIGKILL, each after a grace period. Whatever the process did, every
// process left in its group is killed at the end. It waits for the exit.
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
	appID, pid := r.rec.AppID, r.rec.PID
	r.mu.Unlock()
	r.note("stop requested")
	grace := r.eng.cfg.StopGrace
	if appID != "" && r.kind == store.KindRun {
		rctx, cancel := context.WithTimeout(ctx, grace)
		_, _ = r.request(rctx, "app.stop", machineAppIDParams{AppID: appID})
		cancel()
		if r.wait(ctx, grace) {
			_ = killTree(pid, r.id, syscall.SIGKILL) // leftovers of the group, and what left it
			return nil
		}
	}
	_ = killTree(pid, r.id, syscall.SIGTERM)
	if !r.wait(ctx, grace) {
		if processAlive(pid) {
			r.note("still running after SIGTERM: killing the process group")
			_ = killTree(pid, r.id, syscall.SIGKILL)
			r.wait(ctx, grace)
		}
		if r.live() && !processAlive(pid) {
			// The leader is gone, but a process that left the run (and
			// its mark) holds its output open: stop reading it.
			r.note("its output is held open by a process that left the run: closing it")
			r.closeOutputs()
		}
		r.wait(ctx, 30*time.Second)
	}
	_ = killTree(pid, r.id, syscall.SIGKILL)
	if r.live() {
		return fmt.Errorf("run %s did not exit after SIGKILL", r.id)
	}
	return nil
}

// closeOutputs closes the read ends of the run's output, which ends its
// readers whoever else holds the write ends.
func (r *Run) closeOutputs() {
	r.mu.Lock()
	outs := r.outputs
	r.mu.Unlock()
	for _, c := range outs {
		_ = c.Close()
	}
}

// processAlive reports whether pid is a process that has not exited (a
// zombie has).
func processAlive(pid int) bool {
	return pid > 0 && processStart(pid) != 0 && !zombie(pid)
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

// killGroup signals the process group led by pid. A group that is gone
// already is not an error.
func killGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
