// Package logring keeps the recent log of a run in memory: a bounded ring
// of entries with rising seq numbers, cursors that follow it, and a
// broadcast signal that wakes readers without ever blocking the writer.
//
// A Ring is bounded by entry count and by text bytes, and evicts its oldest
// entries first. Readers do not register with a ring: a reader is only the
// last seq it saw (a Cursor, or a number passed to Since), so memory is
// O(ring), not O(ring × readers), and a reader that stops reading costs
// nothing. A reader that fell behind the ring's first entry gets one gap
// entry that says how many entries it lost and the seq it resumes at.
//
// Waking is a broadcast: the ring holds at most one channel, which the next
// Append (or Close) closes and forgets; the next reader that has to wait
// makes a new one. One close wakes every waiting reader, Append never
// waits for any of them, and when nobody waits Append allocates nothing.
//
// logring does not persist entries (package store does, and a ring is
// seeded from it with Restore), and knows nothing of HTTP, MCP or sessions
// (package daemon). It imports only the standard library.
package logring

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Stream says where an entry came from.
type Stream string

// The streams of a run.
const (
	Stdout Stream = "stdout" // a line the child wrote to stdout
	Stderr Stream = "stderr" // a line the child wrote to stderr
	Event  Stream = "event"  // a --machine event kept as a log line (app.log)
	Fly    Stream = "fly"    // written by fly itself: state changes, exit records, gaps
	Error  Stream = "error"  // a framework error the app reported on its VM service (its rendered text)
)

// Defaults for the zero fields of Options.
const (
	DefaultMaxEntries = 1000
	DefaultMaxBytes   = 100 << 10
	DefaultMaxLine    = 8 << 10
)

// MaxBatch is the most entries one Cursor.Next returns, gap entry included.
const MaxBatch = 256

// Entry is one log line. Entries handed out by a Ring are copies: the ring
// never changes them afterwards, and the caller may keep them.
type Entry struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Stream    Stream    `json:"stream"`
	Text      string    `json:"text"`
	Truncated bool      `json:"truncated,omitempty"` // Text was cut at Options.MaxLine
	Gap       *Gap      `json:"gap,omitempty"`       // set only on gap entries
}

// Gap describes entries a reader lost because they were evicted (or never
// retained) before it read them. A gap entry has Stream Fly, Gap set, and
// Seq = Resume-1, so a reader that remembers the Seq of the last entry it
// got resumes right after the gap.
type Gap struct {
	Lost   uint64 `json:"lost"`   // how many entries were lost
	Resume uint64 `json:"resume"` // seq of the next entry the reader gets
}

// Options bounds a Ring. A zero or negative field means its default.
type Options struct {
	MaxEntries int // entries kept (default 1000)
	MaxBytes   int // bytes of Text kept, summed over entries (default 100 KiB)
	MaxLine    int // longest Text; longer is cut and flagged (default 8 KiB, at most MaxBytes)

	// FirstSeq is the seq before the ring's first entry: the first Append
	// gets FirstSeq+1. A ring restored after a restart sets it to the last
	// seq it ever handed out, so new entries continue that numbering.
	FirstSeq uint64
}

// Ring is the bounded log of one run. All its methods are safe for
// concurrent use. Append holds the ring's mutex for amortized O(1) work,
// and readers hold it only while copying out at most one batch; no method
// ever waits for a reader to consume anything.
type Ring struct {
	maxEntries int
	maxBytes   int
	maxLine    int

	mu     sync.Mutex
	buf    []Entry // circular, oldest at head; grows up to maxEntries
	head   int
	n      int           // entries held
	bytes  int           // sum of len(Text) over held entries
	last   uint64        // seq of the last entry appended (or restored)
	closed bool          // no more appends; readers get io.EOF once drained
	wake   chan struct{} // closed by the next Append or Close; nil until someone waits
}

// New returns an empty ring whose first entry will have seq
// opts.FirstSeq+1.
func New(opts Options) *Ring {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	return &Ring{
		maxEntries: opts.MaxEntries,
		maxBytes:   opts.MaxBytes,
		maxLine:    min(opts.MaxLine, opts.MaxBytes),
		last:       opts.FirstSeq,
	}
}

// Restore returns a ring seeded with persisted entries, which must have
// strictly rising, non-zero seqs and no gap entries; they are read back
// exactly as they were (less any that the bounds of opts evict). Its
// next entry gets seq max(opts.FirstSeq, last seed seq)+1. A seq missing
// between entries reads as a gap. Restore does not keep the slice. Close the
// ring if its run has ended.
func Restore(opts Options, entries []Entry) (*Ring, error) {
	r := New(opts)
	var prev uint64
	for i, e := range entries {
		if e.Gap != nil {
			return nil, fmt.Errorf("restore entry %d: seq %d is a gap entry", i, e.Seq)
		}
		if e.Seq <= prev {
			return nil, fmt.Errorf("restore entry %d: seq %d does not follow %d", i, e.Seq, prev)
		}
		prev = e.Seq
	}
	for _, e := range entries {
		if len(e.Text) > r.maxLine {
			e.Text, e.Truncated = cut(e.Text, r.maxLine), true
		}
		r.push(e)
	}
	r.last = max(r.last, prev)
	return r, nil
}

// Append adds a line to the ring, evicting the oldest entries as the
// bounds require, and wakes every waiting reader. A text longer than
// MaxLine is cut on a UTF-8 boundary and flagged Truncated. Append never
// blocks on readers. It returns a copy of the new entry, or the zero Entry
// (Seq 0) if the ring is closed, in which case the text is dropped.
func (r *Ring) Append(stream Stream, text string) Entry {
	return r.AppendAt(stream, text, time.Time{})
}

// AppendAt is Append for a line read at another time than now (a line a
// run's holder kept while flyd was away): the entry's time is at, or now
// when at is zero.
func (r *Ring) AppendAt(stream Stream, text string, at time.Time) Entry {
	truncated := false
	if len(text) > r.maxLine {
		text, truncated = cut(text, r.maxLine), true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Entry{}
	}
	r.last++
	if at.IsZero() {
		at = time.Now() // under the lock: the times of live entries rise with their seqs
	}
	e := Entry{Seq: r.last, Time: at.Round(0), Stream: stream, Text: text, Truncated: truncated}
	r.push(e)
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	return e
}

// Close marks the run ended: later Appends are dropped, and readers get
// io.EOF once they have read everything. Close wakes every waiting reader.
// Closing a closed ring does nothing.
func (r *Ring) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// Closed reports whether Close was called.
func (r *Ring) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Since returns the entries after seq after, oldest first, at most limit
// of them (all if limit <= 0). If entries after after were lost, the first
// one returned is a gap entry and gap describes it; otherwise gap is nil.
// Entries stop before a missing seq, so one call returns at most one gap.
// Since does not block; it returns nothing if there is nothing new.
func (r *Ring) Since(after uint64, limit int) (entries []Entry, gap *Gap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since(after, limit)
}

// Tail returns the newest n entries (fewer if the ring holds fewer),
// oldest first. It never returns a gap entry.
func (r *Ring) Tail(n int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(max(n, 0), r.n)
	if n == 0 {
		return nil
	}
	out := make([]Entry, n)
	for i := range out {
		out[i] = *r.at(r.n - n + i)
	}
	return out
}

// First returns the seq of the oldest entry held, or Last()+1 if the ring
// is empty.
func (r *Ring) First() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return r.last + 1
	}
	return r.at(0).Seq
}

// Last returns the seq of the newest entry ever appended (or restored), or
// Options.FirstSeq if there is none. Comparing it with a remembered value
// is the cheap way to ask "anything new since seq X?".
func (r *Ring) Last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Len returns the number of entries held.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Bytes returns the bytes of Text held, summed over entries.
func (r *Ring) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Wait returns a channel that is closed once the ring has an entry with
// seq > after or is closed; if that is already so, the channel is already
// closed. Wait itself does not block. It is the building block for select
// loops, such as one that coalesces change notifications:
//
//	for {
//		select {
//		case <-r.Wait(seen):
//		case <-ctx.Done():
//			return
//		}
//		if last := r.Last(); last != seen {
//			seen = last
//			notify(seen)
//		} else if r.Closed() {
//			return
//		}
//		time.Sleep(50 * time.Millisecond) // at most one notification per 50 ms
//	}
//
// Because the check and the subscription are one step, no Append is
// missed between them.
func (r *Ring) Wait(after uint64) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitLocked(after)
}

func (r *Ring) waitLocked(after uint64) <-chan struct{} {
	if r.closed || r.last > after {
		return closedChan
	}
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return r.wake
}

// closedChan is returned by Wait when there is no need to wait.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// next is one step of Cursor.Next: a batch after after, or io.EOF, or a
// channel to wait on, decided under one lock so no wake-up is lost.
func (r *Ring) next(after uint64) ([]Entry, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if es, _ := r.since(after, MaxBatch); len(es) > 0 {
		return es, nil, nil
	}
	if r.closed {
		return nil, nil, io.EOF
	}
	return nil, r.waitLocked(after), nil
}

// at returns the i-th oldest entry held. r.mu must be held.
func (r *Ring) at(i int) *Entry {
	return &r.buf[(r.head+i)%len(r.buf)]
}

// push adds e, evicting as needed. len(e.Text) <= r.maxLine <= r.maxBytes,
// so e always fits once enough is evicted. r.mu must be held.
func (r *Ring) push(e Entry) {
	for r.n > 0 && (r.n >= r.maxEntries || r.bytes+len(e.Text) > r.maxBytes) {
		old := r.at(0)
		r.bytes -= len(old.Text)
		*old = Entry{} // let the text be collected
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	if r.n == len(r.buf) {
		buf := make([]Entry, min(max(2*len(r.buf), 16), r.maxEntries))
		for i := range r.n {
			buf[i] = *r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	*r.at(r.n) = e
	r.n++
	r.bytes += len(e.Text)
}

// search returns the index of the oldest entry with seq > after, or r.n.
// r.mu must be held.
func (r *Ring) search(after uint64) int {
	if r.n == 0 {
		return 0
	}
	// Seqs are contiguous except where Restore left a hole: guess first.
	if first := r.at(0).Seq; after < first {
		return 0
	} else if g := after - first + 1; g < uint64(r.n) && r.at(int(g)).Seq == after+1 {
		return int(g)
	}
	return sort.Search(r.n, func(i int) bool { return r.at(i).Seq > after })
}

// since implements Since. r.mu must be held.
func (r *Ring) since(after uint64, limit int) ([]Entry, *Gap) {
	if after >= r.last {
		return nil, nil // nothing new (or a cursor from the future)
	}
	if limit <= 0 {
		limit = r.n + 1
	}
	i := r.search(after)
	next := r.last + 1 // the seq the reader gets next
	if i < r.n {
		next = r.at(i).Seq
	}
	var gap *Gap
	count := 0
	if next > after+1 {
		gap = &Gap{Lost: next - after - 1, Resume: next}
		count++
	}
	end := i
	for prev := next - 1; end < r.n && count < limit && r.at(end).Seq == prev+1; end++ {
		prev++
		count++
	}
	if count == 0 {
		return nil, nil
	}
	out := make([]Entry, 0, count)
	if gap != nil {
		t := time.Now().Round(0)
		if i < r.n {
			t = r.at(i).Time
		}
		out = append(out, gapEntry(*gap, t))
	}
	for j := i; j < end; j++ {
		out = append(out, *r.at(j))
	}
	return out, gap
}

// gapEntry returns the entry that stands for g. Its Time is that of the
// entry it precedes, so reading the same ring twice gives the same result.
func gapEntry(g Gap, t time.Time) Entry {
	lines, verb := "lines", "they were"
	if g.Lost == 1 {
		lines, verb = "line", "it was"
	}
	return Entry{
		Seq:    g.Resume - 1,
		Time:   t,
		Stream: Fly,
		Text:   fmt.Sprintf("… %d %s lost (evicted before %s read); resuming at seq %d", g.Lost, lines, verb, g.Resume),
		Gap:    &g,
	}
}

// cut returns a copy of the longest prefix of s that has at most n bytes
// and does not split a UTF-8 sequence. The copy lets a huge line's memory
// go.
func cut(s string, n int) string {
	i := n
	for j := n; j > 0 && j > n-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			i = j
			break
		}
	}
	return strings.Clone(s[:i])
}
