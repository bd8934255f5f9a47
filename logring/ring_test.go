package logring

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
)

// follower checks what a reader gets: every seq exactly once, in order, or
// one explicit gap entry that covers exactly the missing ones.
type follower struct {
	next       uint64 // seq expected next
	seen, lost uint64
	gapLast    bool // the previous entry was a gap entry
}

func newFollower(after uint64) *follower { return &follower{next: after + 1} }

func (f *follower) check(e Entry) error {
	if e.Gap != nil {
		g := *e.Gap
		switch {
		case f.gapLast:
			return fmt.Errorf("gap entry %+v right after another gap entry", g)
		case g.Resume <= f.next || g.Lost != g.Resume-f.next:
			return fmt.Errorf("gap %+v when expecting seq %d, want Lost %d", g, f.next, g.Resume-f.next)
		case e.Seq != g.Resume-1 || e.Stream != Fly:
			return fmt.Errorf("gap entry seq %d stream %q, want %d %q", e.Seq, e.Stream, g.Resume-1, Fly)
		}
		f.lost += g.Lost
		f.next = g.Resume
		f.gapLast = true
		return nil
	}
	if e.Seq != f.next {
		return fmt.Errorf("entry seq %d, want %d (silent skip or duplicate)", e.Seq, f.next)
	}
	f.seen++
	f.next++
	f.gapLast = false
	return nil
}

func appendN(r *Ring, n int) {
	for i := range n {
		r.Append(Stdout, fmt.Sprintf("line %d", i))
	}
}

func seqs(es []Entry) []uint64 {
	var s []uint64
	for _, e := range es {
		if e.Gap == nil {
			s = append(s, e.Seq)
		}
	}
	return s
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}

func TestBoundsBurst(t *testing.T) {
	const lines = 100_000
	tests := []struct {
		name string
		opts Options
		line func(i int) string
	}{
		{"defaults", Options{}, func(i int) string { return fmt.Sprintf("line %d", i) }},
		{"count", Options{MaxEntries: 10, MaxBytes: 1 << 20}, func(i int) string { return fmt.Sprint(i) }},
		{"bytes", Options{MaxEntries: lines, MaxBytes: 4096}, func(i int) string { return strings.Repeat("x", i%300) }},
		{"long lines", Options{}, func(i int) string { return strings.Repeat("y", i%10_000) }},
		{"line over bytes", Options{MaxBytes: 100, MaxLine: 1000}, func(i int) string { return strings.Repeat("z", i%150) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.opts)
			maxEntries, maxBytes := r.maxEntries, r.maxBytes
			var last Entry
			for i := range lines {
				e := r.Append(Stdout, tt.line(i))
				if e.Seq != last.Seq+1 {
					t.Fatalf("Append #%d seq = %d, want %d", i, e.Seq, last.Seq+1)
				}
				last = e
				if n, b := r.Len(), r.Bytes(); n > maxEntries || b > maxBytes || n < 1 {
					t.Fatalf("after Append #%d: Len, Bytes = %d, %d, want 1..%d, ≤ %d", i, n, b, maxEntries, maxBytes)
				}
			}
			if got := r.Tail(1); len(got) != 1 || !reflect.DeepEqual(got[0], last) {
				t.Fatalf("Tail(1) = %+v, want [%+v]", got, last)
			}
			if got := r.Last(); got != lines {
				t.Errorf("Last() = %d, want %d", got, lines)
			}
			all, _ := r.Since(0, 0)
			f, sum := newFollower(0), 0
			for _, e := range all {
				if err := f.check(e); err != nil {
					t.Fatal(err)
				}
				if e.Gap == nil {
					sum += len(e.Text)
				}
			}
			if f.next != lines+1 || f.seen != uint64(r.Len()) || sum != r.Bytes() {
				t.Errorf("Since(0, 0): next %d, %d entries, %d bytes; want %d, Len() %d, Bytes() %d",
					f.next, f.seen, sum, lines+1, r.Len(), r.Bytes())
			}
			if got, want := r.First(), all[len(all)-r.Len()].Seq; got != want {
				t.Errorf("First() = %d, want %d", got, want)
			}
		})
	}
}

func TestSinceGap(t *testing.T) {
	r := New(Options{MaxEntries: 10})
	appendN(r, 25) // holds 16..25
	tests := []struct {
		after uint64
		limit int
		gap   *Gap
		seqs  []uint64
	}{
		{0, 0, &Gap{Lost: 15, Resume: 16}, seqRange(16, 25)},
		{5, 0, &Gap{Lost: 10, Resume: 16}, seqRange(16, 25)},
		{14, 0, &Gap{Lost: 1, Resume: 16}, seqRange(16, 25)},
		{15, 0, nil, seqRange(16, 25)},
		{20, 0, nil, seqRange(21, 25)},
		{24, 0, nil, []uint64{25}},
		{25, 0, nil, nil},
		{99, 0, nil, nil},
		{math.MaxUint64, 0, nil, nil},
		{0, 3, &Gap{Lost: 15, Resume: 16}, []uint64{16, 17}},
		{0, 1, &Gap{Lost: 15, Resume: 16}, nil},
		{17, 2, nil, []uint64{18, 19}},
	}
	for _, tt := range tests {
		got, gap := r.Since(tt.after, tt.limit)
		if !reflect.DeepEqual(gap, tt.gap) || !reflect.DeepEqual(seqs(got), tt.seqs) {
			t.Errorf("Since(%d, %d) = %v, %+v; want %v, %+v", tt.after, tt.limit, seqs(got), gap, tt.seqs, tt.gap)
			continue
		}
		if tt.gap != nil && (len(got) == 0 || got[0].Gap == nil || *got[0].Gap != *tt.gap) {
			t.Errorf("Since(%d, %d)[0] = %+v, want the gap entry", tt.after, tt.limit, got)
		}
		if tt.limit > 0 && len(got) > tt.limit {
			t.Errorf("Since(%d, %d) returned %d entries, want ≤ %d", tt.after, tt.limit, len(got), tt.limit)
		}
	}

	texts := []struct {
		after uint64
		want  string
	}{
		{0, "… 15 lines lost (evicted before they were read); resuming at seq 16"},
		{14, "… 1 line lost (evicted before it was read); resuming at seq 16"},
	}
	for _, tt := range texts {
		got, _ := r.Since(tt.after, 1)
		if got[0].Text != tt.want {
			t.Errorf("Since(%d, 1)[0].Text = %q, want %q", tt.after, got[0].Text, tt.want)
		}
		if want := r.Tail(r.Len())[0].Time; !got[0].Time.Equal(want) {
			t.Errorf("Since(%d, 1)[0].Time = %v, want %v (the time of the entry it precedes)", tt.after, got[0].Time, want)
		}
	}
}

func TestCursorGap(t *testing.T) {
	r := New(Options{MaxEntries: 10})
	c := r.Cursor(0)
	f := newFollower(0)
	read := func(wantGap *Gap, wantSeqs []uint64) {
		t.Helper()
		batch, err := c.Next(t.Context())
		if err != nil {
			t.Fatalf("Next() error = %v", err)
		}
		var gaps []Gap
		for _, e := range batch {
			if err := f.check(e); err != nil {
				t.Fatal(err)
			}
			if e.Gap != nil {
				gaps = append(gaps, *e.Gap)
			}
		}
		var want []Gap
		if wantGap != nil {
			want = []Gap{*wantGap}
		}
		if !reflect.DeepEqual(gaps, want) || !reflect.DeepEqual(seqs(batch), wantSeqs) {
			t.Fatalf("Next() = gaps %+v, seqs %v; want %+v, %v", gaps, seqs(batch), want, wantSeqs)
		}
		if c.Seq() != batch[len(batch)-1].Seq {
			t.Fatalf("Seq() = %d, want %d", c.Seq(), batch[len(batch)-1].Seq)
		}
	}
	appendN(r, 25)
	read(&Gap{Lost: 15, Resume: 16}, seqRange(16, 25))
	appendN(r, 5)
	read(nil, seqRange(26, 30))
	appendN(r, 100) // holds 121..130
	read(&Gap{Lost: 90, Resume: 121}, seqRange(121, 130))
	if f.seen+f.lost != 130 {
		t.Errorf("seen %d + lost %d, want 130", f.seen, f.lost)
	}
}

func TestTruncate(t *testing.T) {
	const max = DefaultMaxLine
	tests := []struct {
		name string
		in   string
		want int // len of the kept text
	}{
		{"2-byte runes", strings.Repeat("é", 10_000), max},
		{"3-byte runes cut mid-rune", "a" + strings.Repeat("€", 7000), 1 + 3*2730},
		{"4-byte runes cut mid-rune", "ab" + strings.Repeat("😀", 5000), 2 + 4*2047},
		{"ascii 20KB", strings.Repeat("a", 20<<10), max},
		{"one over", strings.Repeat("a", max+1), max},
		{"exactly max", strings.Repeat("a", max), max},
		{"short", "hello", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Options{})
			e := r.Append(Stderr, tt.in)
			if len(e.Text) != tt.want || !strings.HasPrefix(tt.in, e.Text) {
				t.Errorf("Append(%d bytes).Text = %d bytes, want a %d-byte prefix", len(tt.in), len(e.Text), tt.want)
			}
			if !utf8.ValidString(e.Text) {
				t.Errorf("Append(%d bytes).Text is not valid UTF-8", len(tt.in))
			}
			if want := len(tt.in) > max; e.Truncated != want {
				t.Errorf("Append(%d bytes).Truncated = %v, want %v", len(tt.in), e.Truncated, want)
			}
			if got := r.Tail(1)[0]; !reflect.DeepEqual(got, e) {
				t.Errorf("Tail(1) = %+v, want the appended entry", got)
			}
		})
	}
}

func TestRestore(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	seed := func(from, to uint64) []Entry {
		var es []Entry
		for q := from; q <= to; q++ {
			es = append(es, Entry{Seq: q, Time: at.Add(time.Duration(q) * time.Millisecond), Stream: Stdout, Text: fmt.Sprint("old ", q)})
		}
		return es
	}
	tests := []struct {
		name      string
		opts      Options
		seed      []Entry
		wantFirst uint64
		wantNext  uint64 // seq of the next Append
	}{
		{"seed only", Options{}, seed(1, 500), 1, 501},
		{"FirstSeq after seed", Options{FirstSeq: 520}, seed(1, 500), 1, 521},
		{"FirstSeq before seed", Options{FirstSeq: 10}, seed(1, 500), 1, 501},
		{"no seed", Options{FirstSeq: 42}, nil, 43, 43},
		{"seed over bounds", Options{MaxEntries: 100}, seed(1, 500), 401, 501},
		{"trimmed seed", Options{}, seed(301, 800), 301, 801},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Restore(tt.opts, tt.seed)
			if err != nil {
				t.Fatalf("Restore() error = %v", err)
			}
			if got := r.First(); got != tt.wantFirst {
				t.Errorf("First() = %d, want %d", got, tt.wantFirst)
			}
			if got, want := r.Last(), tt.wantNext-1; got != want {
				t.Errorf("Last() = %d, want %d", got, want)
			}
			if got, want := r.Tail(r.Len()), tt.seed[max(0, len(tt.seed)-r.Len()):]; len(got) > 0 && !reflect.DeepEqual(got, want) {
				t.Errorf("Tail(Len()) = %d entries, want the newest %d seed entries unchanged", len(got), len(want))
			}
			if e := r.Append(Fly, "restarted"); e.Seq != tt.wantNext {
				t.Errorf("Append after Restore: seq = %d, want %d", e.Seq, tt.wantNext)
			}
			// A reader that had read the whole seed resumes without a silent skip.
			var after uint64
			if len(tt.seed) > 0 {
				after = tt.seed[len(tt.seed)-1].Seq
			}
			f := newFollower(after)
			got, _ := r.Since(after, 0)
			for _, e := range got {
				if err := f.check(e); err != nil {
					t.Fatalf("Since(%d, 0): %v", after, err)
				}
			}
			if f.next != tt.wantNext+1 || f.seen != 1 {
				t.Errorf("Since(%d, 0) = %v, want up to seq %d", after, seqs(got), tt.wantNext)
			}
		})
	}
}

// TestRestoreReadsAsBefore: a ring restored from what was persisted reads
// exactly like the live ring did, gap entries included.
func TestRestoreReadsAsBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{MaxEntries: 100, MaxBytes: 2000}
		live := New(opts)
		var persisted []Entry
		for i := range 3000 {
			persisted = append(persisted, live.Append([]Stream{Stdout, Stderr, Event}[i%3], strings.Repeat("l", i%40)))
			time.Sleep(time.Millisecond)
		}
		restored, err := Restore(opts, persisted)
		if err != nil {
			t.Fatal(err)
		}
		for _, after := range []uint64{0, 1500, 2950, 2999, 3000} {
			want, wantGap := live.Since(after, 0)
			got, gotGap := restored.Since(after, 0)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotGap, wantGap) {
				t.Errorf("restored Since(%d, 0) = %v %+v, want %v %+v", after, seqs(got), gotGap, seqs(want), wantGap)
			}
		}
		if live.Len() != restored.Len() || live.Bytes() != restored.Bytes() || live.First() != restored.First() {
			t.Errorf("restored Len, Bytes, First = %d, %d, %d; want %d, %d, %d",
				restored.Len(), restored.Bytes(), restored.First(), live.Len(), live.Bytes(), live.First())
		}
	})
}

// TestRestoreHole: seqs missing between persisted entries read as one gap
// there, never as a silent skip.
func TestRestoreHole(t *testing.T) {
	var seed []Entry
	for _, q := range []uint64{1, 2, 3, 4, 5, 10, 11, 12} {
		seed = append(seed, Entry{Seq: q, Stream: Stdout, Text: fmt.Sprint(q)})
	}
	r, err := Restore(Options{}, seed)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	c := r.Cursor(0)
	f := newFollower(0)
	var got []string
	for {
		batch, err := c.Next(t.Context())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next() error = %v", err)
		}
		for _, e := range batch {
			if err := f.check(e); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, fmt.Sprint(seqs(batch), batch[0].Gap))
	}
	want := []string{"[1 2 3 4 5] <nil>", "[10 11 12] &{4 10}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Next() batches over seqs 1-5, 10-12 = %q, want %q", got, want)
	}
}

func TestRestoreErrors(t *testing.T) {
	e := func(seq uint64) Entry { return Entry{Seq: seq, Stream: Stdout, Text: "x"} }
	gap := gapEntry(Gap{Lost: 1, Resume: 3}, time.Time{})
	tests := []struct {
		name string
		seed []Entry
	}{
		{"zero seq", []Entry{e(0)}},
		{"decreasing", []Entry{e(1), e(3), e(2)}},
		{"duplicate", []Entry{e(1), e(2), e(2)}},
		{"gap entry", []Entry{e(1), gap, e(3)}},
	}
	for _, tt := range tests {
		if r, err := Restore(Options{}, tt.seed); err == nil {
			t.Errorf("Restore(%s) = %v, nil; want an error", tt.name, r)
		}
	}
}

func TestRestoreTruncates(t *testing.T) {
	r, err := Restore(Options{MaxLine: 10}, []Entry{{Seq: 7, Stream: Stdout, Text: "ééééééé"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Tail(1)[0]; got.Text != "ééééé" || !got.Truncated {
		t.Errorf("restored 14-byte text with MaxLine 10 = %q truncated %v, want %q true", got.Text, got.Truncated, "ééééé")
	}
}

func TestTail(t *testing.T) {
	r := New(Options{MaxEntries: 10})
	appendN(r, 25)
	tests := []struct {
		n    int
		want []uint64
	}{
		{-1, nil},
		{0, nil},
		{1, []uint64{25}},
		{3, []uint64{23, 24, 25}},
		{10, seqRange(16, 25)},
		{100, seqRange(16, 25)},
	}
	for _, tt := range tests {
		if got := seqs(r.Tail(tt.n)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tail(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestEmpty(t *testing.T) {
	r := New(Options{})
	if first, last, n, b := r.First(), r.Last(), r.Len(), r.Bytes(); first != 1 || last != 0 || n != 0 || b != 0 {
		t.Errorf("empty ring First, Last, Len, Bytes = %d, %d, %d, %d; want 1, 0, 0, 0", first, last, n, b)
	}
	if got, gap := r.Since(0, 0); got != nil || gap != nil {
		t.Errorf("empty ring Since(0, 0) = %v, %v; want nil, nil", got, gap)
	}
}

// TestEntriesImmutable: what a reader got does not change when the ring
// evicts or a reader mutates its copy.
func TestEntriesImmutable(t *testing.T) {
	r := New(Options{MaxEntries: 2})
	r.Append(Stdout, "a")
	got, _ := r.Since(0, 0)
	got[0].Text = "mutated"
	appendN(r, 10)
	if got2, _ := r.Since(0, 0); got2[0].Text == "mutated" {
		t.Errorf("mutating a returned entry changed the ring")
	}
	r2 := New(Options{MaxEntries: 2})
	r2.Append(Stdout, "a")
	keep, _ := r2.Since(0, 0)
	appendN(r2, 10)
	if keep[0].Seq != 1 || keep[0].Text != "a" {
		t.Errorf("a returned entry changed after eviction: %+v", keep[0])
	}
}

func TestWait(t *testing.T) {
	isClosed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	r := New(Options{})
	r.Append(Stdout, "1")
	if !isClosed(r.Wait(0)) {
		t.Errorf("Wait(0) with Last() = 1 is open, want closed")
	}
	w := r.Wait(1)
	if isClosed(w) {
		t.Fatalf("Wait(1) with Last() = 1 is closed, want open")
	}
	if w2 := r.Wait(1); w2 != w {
		t.Errorf("two waiters got different channels, want one broadcast channel")
	}
	r.Append(Stdout, "2")
	if !isClosed(w) {
		t.Errorf("Wait(1) still open after Append")
	}
	w = r.Wait(2)
	r.Close()
	if !isClosed(w) || !isClosed(r.Wait(2)) || !isClosed(r.Wait(100)) {
		t.Errorf("Wait open after Close, want closed")
	}
	if e := r.Append(Stdout, "late"); e.Seq != 0 || r.Last() != 2 {
		t.Errorf("Append after Close = seq %d, Last() %d; want 0, 2", e.Seq, r.Last())
	}
	if !r.Closed() {
		t.Errorf("Closed() = false after Close")
	}
	r.Close() // idempotent
}
