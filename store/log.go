package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit: the writer commits when it holds maxBatch entries, or
// batchWindow after the first entry it has not committed, whichever is
// first. A kill -9 loses at most one window of log.
const (
	maxBatch    = 256
	batchWindow = 25 * time.Millisecond
)

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
	if len(db.queue) >= min(maxBatch, cap(db.queue)) {
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

// Run is the writer: it commits appended entries in groups (at most 256
// entries, or 25 ms after the first uncommitted one) with one bbolt
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
			take()
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

// full reports whether b must be committed now: it holds maxBatch
// entries, or a Flush is waiting.
func (b *batch) full() bool { return b.n >= maxBatch || len(b.barriers) > 0 }

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

// LogMeta is stored as a version byte and big-endian uint64s: five in
// version 1, and Mark as a sixth in version 2, which a file of version 1
// reads as 0.
const (
	logMetaLen   = 1 + 5*8
	logMetaLenV2 = 1 + 6*8
)

func (m LogMeta) encode() []byte {
	v := make([]byte, 1, logMetaLenV2)
	v[0] = 2
	for _, n := range []uint64{m.FirstSeq, m.LastSeq, m.Entries, m.Bytes, m.Dropped, m.Mark} {
		v = be.AppendUint64(v, n)
	}
	return v
}

func readLogMeta(b *bolt.Bucket) (LogMeta, error) {
	v := b.Get(keyLogMeta)
	if v == nil {
		return LogMeta{}, nil
	}
	if len(v) < logMetaLen || v[0] < 1 || v[0] > 2 || (v[0] == 2 && len(v) < logMetaLenV2) {
		return LogMeta{}, fmt.Errorf("malformed log meta %x", v)
	}
	m := LogMeta{
		FirstSeq: be.Uint64(v[1:]),
		LastSeq:  be.Uint64(v[9:]),
		Entries:  be.Uint64(v[17:]),
		Bytes:    be.Uint64(v[25:]),
		Dropped:  be.Uint64(v[33:]),
	}
	if v[0] == 2 {
		m.Mark = be.Uint64(v[41:])
	}
	return m, nil
}

// An entry's value (its seq is the key) is:
//
//	flags   1 byte: bit 0 set when the text was cut
//	stream  1 byte: 1 stdout, 2 stderr, 3 event, 4 fly, 0 other
//	time    8 bytes: unix nanoseconds, big-endian
//	[name]  for stream 0 only: uvarint length, then the stream's name
//	text    the rest
const (
	entryHeaderLen = 10
	flagTruncated  = 1 << 0
)

var streamCodes = map[string]byte{"stdout": 1, "stderr": 2, "event": 3, "fly": 4}
var streamNames = [...]string{1: "stdout", 2: "stderr", 3: "event", 4: "fly"}

func encodedLen(e Entry) int {
	n := entryHeaderLen + len(e.Text)
	if streamCodes[e.Stream] == 0 {
		n += binary.MaxVarintLen64 + len(e.Stream)
	}
	return n
}

func appendEntry(dst []byte, e Entry) []byte {
	var flags byte
	if e.Truncated {
		flags |= flagTruncated
	}
	code := streamCodes[e.Stream]
	dst = append(dst, flags, code)
	dst = be.AppendUint64(dst, uint64(e.Time.UnixNano()))
	if code == 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Stream)))
		dst = append(dst, e.Stream...)
	}
	return append(dst, e.Text...)
}

// decodeEntry copies the entry at k, v out of the transaction.
func decodeEntry(k, v []byte) (Entry, error) {
	seq := be.Uint64(k)
	if len(v) < entryHeaderLen {
		return Entry{}, fmt.Errorf("decode log entry %d: %d bytes is too short", seq, len(v))
	}
	e := Entry{
		Seq:       seq,
		Truncated: v[0]&flagTruncated != 0,
		Time:      time.Unix(0, int64(be.Uint64(v[2:]))),
	}
	rest := v[entryHeaderLen:]
	switch code := v[1]; {
	case code == 0:
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return Entry{}, fmt.Errorf("decode log entry %d: bad stream name", seq)
		}
		e.Stream = string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
	case int(code) < len(streamNames):
		e.Stream = streamNames[code]
	default:
		return Entry{}, fmt.Errorf("decode log entry %d: unknown stream %d", seq, code)
	}
	e.Text = string(rest)
	return e, nil
}

// textLen is the length of the text in an encoded entry, for the Bytes
// counter; a malformed value counts as empty.
func textLen(v []byte) int {
	if len(v) < entryHeaderLen {
		return 0
	}
	n := len(v) - entryHeaderLen
	if v[1] == 0 {
		l, w := binary.Uvarint(v[entryHeaderLen:])
		if w <= 0 || l > uint64(n-w) {
			return 0
		}
		n -= w + int(l)
	}
	return n
}
