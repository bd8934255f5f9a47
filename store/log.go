package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The persisted log of every run: its entries and counters, queueing
// entries and run records for the writer, Flush, and reading a run's log
// back.

var be = binary.BigEndian

// Entry is one persisted log line of a run.
type Entry struct {
	// Seq is the entry's position in its run's log. Append with Seq 0
	// stores the entry at the run's LastSeq+1.
	Seq       uint64
	Time      time.Time
	Stream    string // stdout, stderr, event or fly; any other name is kept too
	Text      string
	Truncated bool // the line was cut
}

// LogMeta holds the counters of one run's persisted log.
type LogMeta struct {
	FirstSeq uint64 // oldest entry kept; 0 when there is none
	LastSeq  uint64 // newest entry ever stored; new entries continue after it
	Entries  uint64 // entries kept
	Bytes    uint64 // text bytes kept
	Dropped  uint64 // entries whose commit failed (a full disk, say)
	// Mark is the newest mark of an AppendGroup committed: how far the
	// run's source (its holder's spool) is in the store, entries made
	// from it and the mark being committed together.
	Mark uint64
}

// op is one item of the writer's queue: a log entry, a run record (rec
// non-nil: its JSON), or, when done is non-nil, a Flush barrier.
type op struct {
	run   string
	e     Entry
	group []Entry // an AppendGroup's entries (e unused), committed with mark
	mark  uint64
	rec   []byte
	ended bool // rec is a finished run's: its commit prunes (see Prune)
	done  chan error
}

// Append queues e for the run's log. It returns at once while the queue
// has room; when the writer has fallen behind, it waits for room, so that
// no entry is ever lost: a child that prints faster than the disk takes
// its lines is slowed down, as docker's blocking log mode does, rather
// than losing them. (If no writer is running, Append commits the queue
// itself.) The entry is durable once a later Flush returns. A zero e.Time
// is set to now. After Close it returns ErrClosed. Append is safe to call
// from many goroutines; entries of one run keep the order of their
// Appends.
func (db *DB) Append(runID string, e Entry) error {
	if runID == "" || len(runID) > bolt.MaxKeySize {
		return fmt.Errorf("append log entry: bad run id %.40q", runID)
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	return db.enqueue(op{run: runID, e: e})
}

// AppendGroup queues entries for the run's log as one unit, with mark:
// they and the mark are committed in one transaction, or none of them
// is. The run's LogMeta.Mark becomes mark (if it is higher), so that
// whoever feeds the log from a source of its own (a holder's spool)
// resumes right after what is stored, with nothing lost and nothing
// twice. Otherwise it is Append.
func (db *DB) AppendGroup(runID string, entries []Entry, mark uint64) error {
	if runID == "" || len(runID) > bolt.MaxKeySize {
		return fmt.Errorf("append log entries: bad run id %.40q", runID)
	}
	now := time.Now()
	for i := range entries {
		if entries[i].Time.IsZero() {
			entries[i].Time = now
		}
	}
	if entries == nil {
		entries = []Entry{} // a group of none still moves the mark
	}
	return db.enqueue(op{run: runID, group: entries, mark: mark})
}

// QueueRun queues r to be written with the next group commit, replacing
// any record with its id, and returns without waiting for the disk
// unless the queue is full (as Append). It is durable once a later Flush
// returns. PutRun is the synchronous form.
func (db *DB) QueueRun(r Record) error {
	if r.ID == "" || len(r.ID) > bolt.MaxKeySize {
		return fmt.Errorf("queue run: bad id %.40q", r.ID)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("queue run %s: %w", r.ID, err)
	}
	return db.enqueue(op{run: r.ID, rec: v, ended: !r.State.Live()})
}

// enqueue puts o on the writer's queue, waiting for room if need be.
func (db *DB) enqueue(o op) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	select {
	case db.queue <- o:
		db.pokeIfBatch()
		return nil
	default:
	}
	db.waits.Add(1)
	for {
		db.writerMu.Lock()
		stopped := db.stopped
		if stopped == nil { // no writer: make room ourselves
			db.commitQueued()
			db.writerMu.Unlock()
			select {
			case db.queue <- o:
				return nil
			default:
				continue
			}
		}
		db.writerMu.Unlock()
		select {
		case db.queue <- o:
			db.pokeIfBatch()
			return nil
		case <-stopped:
		case <-db.closing:
			return ErrClosed
		}
	}
}

// pokeIfBatch tells the writer when the queue holds a whole batch.
func (db *DB) pokeIfBatch() {
	if len(db.queue) >= min(MaxBatch, cap(db.queue)) {
		db.poke()
	}
}

// poke wakes the writer if it waits for a whole batch.
func (db *DB) poke() {
	select {
	case db.batchReady <- struct{}{}:
	default:
	}
}

// Waits returns how many times Append or QueueRun found the queue full
// and waited for the writer.
func (db *DB) Waits() int64 { return db.waits.Load() }

// Flush waits until every entry appended before it is committed, and
// returns the first commit error since the previous Flush. If Run is not
// running, Flush commits the queue itself. It may block on the disk; ctx
// bounds the wait.
func (db *DB) Flush(ctx context.Context) error {
	for {
		db.writerMu.Lock()
		stopped := db.stopped
		if stopped == nil {
			err := db.drain()
			db.writerMu.Unlock()
			return err
		}
		db.writerMu.Unlock()

		done := make(chan error, 1)
		select {
		case db.queue <- op{done: done}:
			db.poke()
		case <-stopped:
			continue
		case <-ctx.Done():
			return fmt.Errorf("flush log: %w", ctx.Err())
		}

		select {
		case err := <-done:
			return err
		case <-stopped:
			select {
			case err := <-done:
				return err
			default: // the barrier was left in the queue; drain it ourselves
			}
		case <-ctx.Done():
			return fmt.Errorf("flush log: %w", ctx.Err())
		}
	}
}

// Logs returns up to limit entries of the run with Seq > afterSeq, oldest
// first; limit <= 0 means all of them. It returns ErrNotFound for a run
// with neither a record nor a log.
func (db *DB) Logs(runID string, afterSeq uint64, limit int) ([]Entry, error) {
	var out []Entry
	err := db.viewLog(runID, func(b *bolt.Bucket) error {
		if b == nil || afterSeq == math.MaxUint64 {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(be.AppendUint64(nil, afterSeq+1)); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				continue
			}
			if limit > 0 && len(out) == limit {
				break
			}
			e, err := decodeEntry(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read log of run %s: %w", runID, err)
	}
	return out, nil
}

// Tail returns the last n entries of the run, oldest first. It returns
// ErrNotFound for a run with neither a record nor a log.
func (db *DB) Tail(runID string, n int) ([]Entry, error) {
	var out []Entry
	err := db.viewLog(runID, func(b *bolt.Bucket) error {
		if b == nil || n <= 0 {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			if len(k) != 8 {
				continue
			}
			e, err := decodeEntry(k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tail log of run %s: %w", runID, err)
	}
	slices.Reverse(out)
	return out, nil
}

// LogStats returns the counters of the run's persisted log, as of the last
// commit (Flush first for an exact count). A run with a record but no log
// yet has zero counters. It returns ErrNotFound for a run with neither.
func (db *DB) LogStats(runID string) (LogMeta, error) {
	var m LogMeta
	err := db.viewLog(runID, func(b *bolt.Bucket) error {
		if b == nil {
			return nil
		}
		var err error
		m, err = readLogMeta(b)
		return err
	})
	if err != nil {
		return LogMeta{}, fmt.Errorf("log stats of run %s: %w", runID, err)
	}
	return m, nil
}

// viewLog calls fn in a read transaction with the run's log bucket, or
// nil if the run has a record but no log yet.
func (db *DB) viewLog(runID string, fn func(*bolt.Bucket) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs).Bucket([]byte(runID))
		if b == nil && tx.Bucket(bucketRuns).Get([]byte(runID)) == nil {
			return ErrNotFound
		}
		return fn(b)
	})
}
