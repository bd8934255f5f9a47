package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The writer: one goroutine that takes what is queued and commits it in
// groups, a bbolt transaction each, and trims each run's log to its
// bounds.

// Group commit: the writer commits when it holds MaxBatch entries, or
// batchWindow after the first entry it has not committed, whichever is
// first. A kill -9 loses at most one window of log. A flood's commits are
// bound by their fsyncs: 1024 entries a commit persisted 0.84–1.05 M
// lines/s of BenchmarkIngest where 256 did 0.42–0.51 M.
const batchWindow = 25 * time.Millisecond

// MaxBatch is the most entries one commit holds.
const MaxBatch = 1024

// Run is the writer: it commits appended entries in groups (at most
// MaxBatch entries, or 25 ms after the first uncommitted one) with one bbolt
// transaction per group, covering many runs. It blocks until ctx is
// cancelled or Close is called, commits what is queued, and returns the
// first commit error since the last Flush, or nil. Failed commits are also
// logged; they do not stop the writer. Only one Run may be active at a
// time; a stopped Run may be started again.
func (db *DB) Run(ctx context.Context) error {
	db.writerMu.Lock()
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed || db.stopped != nil {
		db.writerMu.Unlock()
		if closed {
			return ErrClosed
		}
		return errors.New("store writer is already running")
	}
	stopped := make(chan struct{})
	db.stopped = stopped
	db.writerMu.Unlock()

	var b batch
	timer := time.NewTimer(batchWindow)
	timer.Stop()
	defer timer.Stop()
	take := func() { // what is already queued, without another select
		for !b.full() {
			select {
			case o := <-db.queue:
				b.add(o)
				continue
			default:
			}
			break
		}
	}
	for {
		// With part of a batch in hand, the writer waits for the rest to
		// be queued (a poke), or for the window, not for each entry: at
		// 200k lines/s a wake-up per entry cost a fifth of ingest.
		var window <-chan time.Time
		queue := db.queue
		if b.pending() {
			window, queue = timer.C, nil
		}
		select {
		case <-ctx.Done():
			return db.stop(&b, stopped)
		case <-db.closing:
			return db.stop(&b, stopped)
		case o := <-queue:
			timer.Reset(batchWindow)
			b.add(o)
			take()
		case <-db.batchReady:
			// A token left from a Flush the queue case already served may
			// find a few entries and no whole batch: their window starts
			// now, as it does when the queue case takes the first.
			pending := b.pending()
			take()
			if !pending && b.pending() {
				timer.Reset(batchWindow)
			}
		case <-window:
			take()
			db.commit(&b)
		}
		if b.full() {
			timer.Stop()
			db.commit(&b)
		}
	}
}

// stop ends Run: it commits b and the queue, then lets Flush and Close
// drain by themselves.
func (db *DB) stop(b *batch, stopped chan struct{}) error {
	db.commit(b)
	err := db.drain()
	db.writerMu.Lock()
	db.stopped = nil
	db.writerMu.Unlock()
	close(stopped)
	return err
}

// batch is what the writer has taken from the queue and not committed.
type batch struct {
	ops      []op
	n        int // entries in ops (a group counts as its entries)
	barriers []chan error
}

func (b *batch) add(o op) {
	if o.done != nil {
		b.barriers = append(b.barriers, o.done)
	} else {
		b.ops = append(b.ops, o)
		b.n += max(1, len(o.group))
	}
}

func (b *batch) pending() bool { return len(b.ops) > 0 }

// full reports whether b must be committed now: it holds MaxBatch
// entries, or a Flush is waiting.
func (b *batch) full() bool { return b.n >= MaxBatch || len(b.barriers) > 0 }

// drain commits the entries queued when it starts, in batches, answers
// their Flush barriers, and returns the first commit error since the last
// Flush. The caller is the writer: Run, or the holder of writerMu while
// Run is not running.
func (db *DB) drain() error {
	db.commitQueued()
	err := db.failed
	db.failed = nil
	return err
}

// commitQueued commits what is queued when it starts, as drain does, but
// leaves the commit error for the next Flush.
func (db *DB) commitQueued() {
	var b batch
	for n := len(db.queue); n > 0; n-- {
		b.add(<-db.queue)
		if b.full() {
			db.commit(&b)
		}
	}
	db.commit(&b)
}

// commit writes b in one bbolt transaction, answers its barriers and
// resets it. A failed commit is logged, its entries are counted as
// dropped, and the error is kept for the next Flush.
func (db *DB) commit(b *batch) {
	drops := db.takeDrops()
	if len(b.ops) > 0 || len(drops) > 0 {
		if db.beforeCommit != nil {
			db.beforeCommit()
		}
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			if err := writeLogs(tx, b.ops, drops, db.opts.MaxLogEntries, uint64(db.opts.MaxLogBytes)); err != nil {
				return err
			}
			// A run that ended may push the oldest out: prune as records
			// are added, not only when the file opens.
			if slices.ContainsFunc(b.ops, func(o op) bool { return o.ended }) {
				if _, err := db.prune(tx, time.Now()); err != nil {
					db.log.Warn("prune runs", logErr, err)
				}
			}
			return nil
		})
		db.commits.Add(1)
		lost := 0
		for _, o := range b.ops {
			if o.rec == nil {
				lost += max(1, len(o.group))
			}
		}
		db.failures.observe(err, lost)
		if err != nil {
			err = fmt.Errorf("commit %d log entries: %w", len(b.ops), err)
			db.dropsMu.Lock()
			for _, o := range b.ops {
				if o.rec == nil {
					db.drops[o.run] += uint64(max(1, len(o.group)))
				}
			}
			for run, n := range drops {
				db.drops[run] += n
			}
			db.dropsMu.Unlock()
			if db.failed == nil {
				db.failed = err
			}
		}
	}
	if len(b.barriers) > 0 {
		err := db.failed
		db.failed = nil
		for _, done := range b.barriers {
			done <- err
		}
	}
	clear(b.ops) // release the texts
	b.ops = b.ops[:0]
	b.n = 0
	b.barriers = b.barriers[:0]
}

func (db *DB) takeDrops() map[string]uint64 {
	db.dropsMu.Lock()
	defer db.dropsMu.Unlock()
	if len(db.drops) == 0 {
		return nil
	}
	d := db.drops
	db.drops = make(map[string]uint64)
	return d
}

// writeLogs stores ops and drop counts, run by run, then trims each
// touched run's log to its bounds.
func writeLogs(tx *bolt.Tx, ops []op, drops map[string]uint64, maxEntries int, maxBytes uint64) error {
	logs := tx.Bucket(bucketLogs)
	// Keys and values must stay valid until the transaction ends: encode
	// them into two slabs.
	size, n := 0, 0
	for _, o := range ops {
		if o.group != nil {
			for _, e := range o.group {
				size += encodedLen(e)
			}
			n += len(o.group)
			continue
		}
		size += encodedLen(o.e)
		n++
	}
	keys := make([]byte, 0, 8*n)
	vals := make([]byte, 0, size)

	var order []string // runs in order of first appearance
	byRun := make(map[string][]int)
	for i, o := range ops {
		if o.rec != nil {
			if err := tx.Bucket(bucketRuns).Put([]byte(o.run), o.rec); err != nil {
				return fmt.Errorf("put run %s: %w", o.run, err)
			}
			continue
		}
		if _, ok := byRun[o.run]; !ok {
			order = append(order, o.run)
		}
		byRun[o.run] = append(byRun[o.run], i)
	}
	for run := range drops {
		if _, ok := byRun[run]; !ok {
			order = append(order, run)
			byRun[run] = nil
		}
	}

	for _, run := range order {
		b, err := logs.CreateBucketIfNotExists([]byte(run))
		if err != nil {
			return fmt.Errorf("log bucket of run %s: %w", run, err)
		}
		b.FillPercent = 1 // keys are appended in order
		m, err := readLogMeta(b)
		if err != nil {
			return fmt.Errorf("run %s: %w", run, err)
		}
		put := func(e Entry) error {
			if e.Seq == 0 {
				e.Seq = m.LastSeq + 1
			}
			k := be.AppendUint64(keys[len(keys):], e.Seq)
			keys = keys[:len(keys)+8]
			v := appendEntry(vals[len(vals):], e)
			vals = vals[:len(vals)+len(v)]
			if e.Seq <= m.LastSeq { // a rewrite of a kept seq?
				if old := b.Get(k); old != nil {
					m.Entries--
					m.Bytes -= uint64(textLen(old))
				}
			}
			if err := b.Put(k, v); err != nil {
				return fmt.Errorf("put log entry %d of run %s: %w", e.Seq, run, err)
			}
			m.Entries++
			m.Bytes += uint64(len(e.Text))
			m.LastSeq = max(m.LastSeq, e.Seq)
			if m.FirstSeq == 0 || e.Seq < m.FirstSeq {
				m.FirstSeq = e.Seq
			}
			return nil
		}
		for _, i := range byRun[run] {
			if o := ops[i]; o.group != nil {
				for _, e := range o.group {
					if err := put(e); err != nil {
						return err
					}
				}
				m.Mark = max(m.Mark, o.mark)
				continue
			}
			if err := put(ops[i].e); err != nil {
				return err
			}
		}
		m.Dropped += drops[run]
		if m.Entries > uint64(maxEntries) || m.Bytes > maxBytes {
			if err := trim(b, &m, uint64(maxEntries), maxBytes); err != nil {
				return fmt.Errorf("trim log of run %s: %w", run, err)
			}
		}
		if err := b.Put(keyLogMeta, m.encode()); err != nil {
			return fmt.Errorf("write log meta of run %s: %w", run, err)
		}
	}
	return nil
}

// trim deletes the oldest entries of b until m is within bounds.
func trim(b *bolt.Bucket, m *LogMeta, maxEntries, maxBytes uint64) error {
	c := b.Cursor()
	for m.Entries > maxEntries || m.Bytes > maxBytes {
		k, v := c.First()
		if len(k) != 8 {
			break
		}
		n := textLen(v)
		if err := c.Delete(); err != nil {
			return err
		}
		m.Entries--
		m.Bytes -= uint64(n)
	}
	m.FirstSeq = 0
	if k, _ := c.First(); len(k) == 8 {
		m.FirstSeq = be.Uint64(k)
	}
	return nil
}
