package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fly-dev/fly/internal/wire"
)

// Kind says what started a run.
type Kind string

const (
	KindRun   Kind = "run"   // flutter run
	KindBuild Kind = "build" // flutter build
	KindTool  Kind = "tool"  // a one-shot command: devices, doctor, create
	// KindUpstream is a shared upstream MCP server: flyd speaks MCP on
	// its stdio, and its stderr is the log.
	KindUpstream Kind = "upstream"
	// KindApp is an app fly follows but did not start (an IDE's, a
	// terminal's): no process of flyd's, only its VM service.
	KindApp Kind = "app"
	// KindAttach is `flutter attach --machine` started by flyd to reload
	// an attached app whose own tool is gone.
	KindAttach Kind = "attach"
)

// State is where a run is in its life.
type State string

const (
	StateStarting    State = wire.RunStarting
	StateRunning     State = wire.RunRunning
	StateStopped     State = wire.RunStopped     // stopped by a client or by flyd's shutdown
	StateExited      State = wire.RunExited      // the process exited by itself, with code 0
	StateFailed      State = wire.RunFailed      // it could not start, exited non-zero or timed out
	StateCancelled   State = wire.RunCancelled   // the call that waited for it was cancelled, so it was killed
	StateInterrupted State = wire.RunInterrupted // flyd died while it was live; see MarkInterrupted
)

// Live reports whether a run in state s may still have a process.
func (s State) Live() bool { return s == StateStarting || s == StateRunning }

// Record is the persisted record of one run, build or tool invocation.
type Record struct {
	ID    string   `json:"id"`
	Kind  Kind     `json:"kind"`
	Argv  []string `json:"argv"`
	Root  string   `json:"root"`
	State State    `json:"state"`
	PID   int      `json:"pid,omitempty"`
	// PIDStart identifies the process together with PID, so that a stale
	// record never signals a process that reused the pid. It is opaque,
	// set by whoever reads it from the OS (on Linux, the starttime field of
	// /proc/PID/stat), compared for equality only; 0 means unknown.
	PIDStart     uint64    `json:"pid_start,omitempty"`
	ExitCode     *int      `json:"exit_code,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	AppID        string    `json:"app_id,omitempty"`
	VMServiceURI string    `json:"vm_service_uri,omitempty"`
	DTDURI       string    `json:"dtd_uri,omitempty"`
	Error        string    `json:"error,omitempty"`
	// StartedBy is the client that started the run; nil for runs older
	// than the field, and for those flyd started itself.
	StartedBy *Actor `json:"started_by,omitempty"`
	// LastAction is the newest thing a client did to the run.
	LastAction *Action `json:"last_action,omitempty"`
	// Errors counts the app's framework errors (a flutter run's).
	Errors *ErrorCounts `json:"errors,omitempty"`
	// Holder is the directory of the run's holder (internal/holder), for
	// a run that outlives flyd; "" for one that ends with it.
	Holder string `json:"holder,omitempty"`
	// Mode is the build mode flutter reported: debug, profile or release.
	Mode string `json:"mode,omitempty"`
	// Journal is what clients did to the run, oldest first (the newest
	// few), Claim a session's hold on it while it lasts, and Heard, by
	// session handle, the newest action of the journal that session was
	// told of: a run that outlives flyd keeps them across its restarts.
	Journal []JournalEntry    `json:"journal,omitempty"`
	Claim   *ClaimRecord      `json:"claim,omitempty"`
	Heard   map[string]uint64 `json:"heard,omitempty"`
}

// JournalEntry is one action of a run's journal, numbered.
type JournalEntry struct {
	Seq uint64 `json:"seq"`
	Action
}

// ClaimRecord is a session's hold on a run.
type ClaimRecord struct {
	By    Actor     `json:"by"`
	Note  string    `json:"note,omitempty"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Actor is who acted on a run: a client session of flyd (its id and the
// name its client gave), or flyctl.
type Actor struct {
	Session string `json:"session,omitempty"`
	Client  string `json:"client"`
	// Workspace is the root the client serves, set only when it is not
	// the run's own: an action from another workspace is marked so.
	Workspace string `json:"workspace,omitempty"`
}

// Action is one thing a client did to a run.
type Action struct {
	What    string    `json:"what"` // start, hot reload, hot restart, stop
	By      Actor     `json:"by"`
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome,omitempty"` // one line: what came of it
	Forced  bool      `json:"forced,omitempty"`  // it overrode another session's claim
}

// ErrorCounts counts a run's framework errors.
type ErrorCounts struct {
	Total    int `json:"total"`    // errors the app reported, repeats included
	Distinct int `json:"distinct"` // distinct errors kept
	Current  int `json:"current"`  // distinct errors since the last reload or restart
}

// NewRunID returns a new run id: 18 characters of lower-case Crockford
// base32, a millisecond timestamp then random bits. Ids sort in creation
// order, strictly so within one process.
func NewRunID() string {
	ms := uint64(time.Now().UnixMilli())
	idGen.Lock()
	var r uint64
	if ms <= idGen.ms { // same millisecond, or the clock went back
		ms, r = idGen.ms, idGen.r+1
		if r >= 1<<40 {
			ms, r = ms+1, 0
		}
	} else {
		r = rand.Uint64N(1 << 39) // leave room to count up
	}
	idGen.ms, idGen.r = ms, r
	idGen.Unlock()

	const digits = "0123456789abcdefghjkmnpqrstvwxyz"
	var id [18]byte
	for i := 9; i >= 0; i-- { // 50 bits of time
		id[i] = digits[ms&31]
		ms >>= 5
	}
	for i := 17; i >= 10; i-- { // 40 bits of sequence
		id[i] = digits[r&31]
		r >>= 5
	}
	return string(id[:])
}

// idGen keeps NewRunID monotonic.
var idGen struct {
	sync.Mutex
	ms, r uint64
}

// PutRun writes r, replacing any record with its id, and returns once it
// is on disk.
func (db *DB) PutRun(r Record) error {
	if r.ID == "" {
		return errors.New("put run: empty id")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put run %s: %w", r.ID, err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Put([]byte(r.ID), v)
	})
	if err != nil {
		return fmt.Errorf("put run %s: %w", r.ID, err)
	}
	return nil
}

// GetRun returns the record of run id, or an error wrapping ErrNotFound.
// (Run is the writer.)
func (db *DB) GetRun(id string) (Record, error) {
	var v []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucketRuns).Get([]byte(id)))
		return nil
	})
	if err == nil && v == nil {
		err = ErrNotFound
	}
	var r Record
	if err == nil {
		err = json.Unmarshal(v, &r)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// Runs returns every run record, newest first (by id, which NewRunID
// makes creation order).
func (db *DB) Runs() ([]Record, error) {
	var vals [][]byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			vals = append(vals, bytes.Clone(v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs := make([]Record, len(vals))
	for i, v := range vals {
		if err := json.Unmarshal(v, &runs[i]); err != nil {
			return nil, fmt.Errorf("list runs: decode record %d: %w", i, err)
		}
	}
	return runs, nil
}

// MarkInterrupted marks every run left starting or running, by a flyd that
// did not shut down cleanly, as interrupted, with EndedAt set to now,
// except those spare keeps (nil keeps none): runs whose process outlives
// flyd (a holder's), which the caller takes back. It returns the runs it
// marked, so that the caller can kill their process groups after checking
// PID and PIDStart, and those it spared. Call it at start, before any run
// is started. Interrupted runs are never relaunched.
func (db *DB) MarkInterrupted(spare func(Record) bool) (marked, spared []Record, err error) {
	now := time.Now()
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		type put struct{ k, v []byte }
		var puts []put
		err := b.ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode run %s: %w", k, err)
			}
			if !r.State.Live() {
				return nil
			}
			if spare != nil && spare(r) {
				spared = append(spared, r)
				return nil
			}
			r.State = StateInterrupted
			if r.EndedAt.IsZero() {
				r.EndedAt = now
			}
			nv, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("encode run %s: %w", k, err)
			}
			puts = append(puts, put{bytes.Clone(k), nv})
			marked = append(marked, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range puts { // not inside ForEach: it must not modify b
			if err := b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mark interrupted runs: %w", err)
	}
	return marked, spared, nil
}

// Prune deletes finished runs, with their logs, beyond the newest
// Options.KeepRuns finished ones or that ended more than Options.MaxAge
// before now, and logs whose run has no record. Upstream servers' records
// are counted apart, at most keepUpstreams of them, so that an upstream
// that restarts often never pushes the user's runs and builds out. Live
// runs are kept. It returns how many runs it deleted. Open calls it, and
// so does every commit that records a run's end.
func (db *DB) Prune(now time.Time) (int, error) {
	var n int
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		n, err = db.prune(tx, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	return n, nil
}

// keepUpstreams is how many finished upstream records Prune keeps (fewer
// when Options.KeepRuns is smaller): each is one process's stderr, and a
// crash-looping upstream makes one every few seconds.
const keepUpstreams = 20

func (db *DB) prune(tx *bolt.Tx, now time.Time) (int, error) {
	n := 0
	runs, logs := tx.Bucket(bucketRuns), tx.Bucket(bucketLogs)
	var doomed [][]byte
	finished, upstreams := 0, 0
	keepUp := keepUpstreams
	if db.opts.KeepRuns >= 0 {
		keepUp = min(keepUp, db.opts.KeepRuns)
	}
	c := runs.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			doomed = append(doomed, bytes.Clone(k)) // a damaged record: nothing can show it
			continue
		}
		if r.State.Live() {
			continue
		}
		end := r.EndedAt
		if end.IsZero() {
			end = r.StartedAt
		}
		tooOld := db.opts.MaxAge >= 0 && !end.IsZero() && now.Sub(end) > db.opts.MaxAge
		count, keep := &finished, db.opts.KeepRuns
		if r.Kind == KindUpstream {
			count, keep = &upstreams, keepUp
		}
		if !tooOld {
			*count++
		}
		if tooOld || keep >= 0 && *count > keep {
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	c = logs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil && runs.Get(k) == nil { // a log bucket without a record
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	for _, id := range doomed {
		if runs.Get(id) != nil {
			if err := runs.Delete(id); err != nil {
				return n, fmt.Errorf("delete run %s: %w", id, err)
			}
			n++
		}
		if err := logs.DeleteBucket(id); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return n, fmt.Errorf("delete log of run %s: %w", id, err)
		}
	}
	return n, nil
}

// Name is how an agent is told of the actor: its client's name, quoted
// (the client chose it: quoted, it cannot read as more of the sentence it
// is put in, nor carry a control or format character), and the start of
// its session id, which tell two windows of one editor apart:
// `"cursor" #3f9a1c`.
func (a Actor) Name() string {
	name := "a client"
	if a.Client != "" {
		name = strconv.Quote(a.Client)
	}
	if a.Session != "" {
		id := a.Session
		if len(id) > 6 {
			id = id[:6]
		}
		name += " #" + id
	}
	return name
}
