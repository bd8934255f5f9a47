package logring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// nextAsync runs c.Next(ctx) in a goroutine and returns a channel that
// gets its result. The caller owns the goroutine: it ends when Next does.
func nextAsync(ctx context.Context, c *Cursor) <-chan result {
	ch := make(chan result, 1)
	go func() {
		es, err := c.Next(ctx)
		ch <- result{es, err}
	}()
	return ch
}

type result struct {
	entries []Entry
	err     error
}

func TestCursorWakes(t *testing.T) {
	tests := []struct {
		name    string
		act     func(r *Ring, cancel context.CancelFunc)
		wantErr error
		want    []uint64
	}{
		{"append", func(r *Ring, _ context.CancelFunc) { r.Append(Stdout, "hello") }, nil, []uint64{1}},
		{"cancel", func(_ *Ring, cancel context.CancelFunc) { cancel() }, context.Canceled, nil},
		{"close", func(r *Ring, _ context.CancelFunc) { r.Close() }, io.EOF, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(Options{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := nextAsync(ctx, r.Cursor(0))
				synctest.Wait() // Next is durably blocked
				select {
				case res := <-done:
					t.Fatalf("Next() returned %v, %v before anything happened", seqs(res.entries), res.err)
				default:
				}
				tt.act(r, cancel)
				res := <-done
				if !errors.Is(res.err, tt.wantErr) || fmt.Sprint(seqs(res.entries)) != fmt.Sprint(tt.want) {
					t.Errorf("Next() after %s = %v, %v; want %v, %v", tt.name, seqs(res.entries), res.err, tt.want, tt.wantErr)
				}
			})
		})
	}
}

func TestCursorDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := r.Cursor(0).Next(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Next(1s deadline) = %v after %v, want %v after 1s", err, time.Since(start), context.DeadlineExceeded)
		}
	})
}

func TestCursorDrainThenEOF(t *testing.T) {
	tests := []struct {
		appended int
		batches  []int // len of each batch before io.EOF
	}{
		{0, nil},
		{3, []int{3}},
		{MaxBatch, []int{MaxBatch}},
		{600, []int{MaxBatch, MaxBatch, 600 - 2*MaxBatch}},
		{1500, []int{MaxBatch, MaxBatch, MaxBatch, 1000 - 3*MaxBatch + 1}}, // a gap entry, then the 1000 held
	}
	for _, tt := range tests {
		r := New(Options{})
		appendN(r, tt.appended)
		r.Close()
		c := r.Cursor(0)
		var got []int
		f := newFollower(0)
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
			got = append(got, len(batch))
			if len(got) > 10 {
				t.Fatalf("no io.EOF after %v", got)
			}
		}
		if _, err := c.Next(t.Context()); err != io.EOF {
			t.Errorf("Next() after io.EOF = %v, want io.EOF again", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.batches) || f.next != uint64(tt.appended)+1 {
			t.Errorf("Next() batches after %d appends and Close = %v up to seq %d, want %v up to %d",
				tt.appended, got, f.next-1, tt.batches, tt.appended)
		}
	}
}

// TestConcurrentCursors: 100 readers, some slow enough to fall behind,
// follow a writer of 100k entries. Each sees every seq exactly once or an
// explicit gap that covers it, then io.EOF.
func TestConcurrentCursors(t *testing.T) {
	const (
		readers = 100
		lines   = 100_000
	)
	r := New(Options{})
	var seen, lost, gaps atomic.Uint64
	var wg sync.WaitGroup // the readers
	for i := range readers {
		c := r.Cursor(0)
		wg.Go(func() {
			f := newFollower(0)
			for n := 0; ; n++ {
				batch, err := c.Next(t.Context())
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("reader %d: Next() error = %v", i, err)
					return
				}
				for _, e := range batch {
					if err := f.check(e); err != nil {
						t.Errorf("reader %d: %v", i, err)
						return
					}
					if e.Gap != nil {
						gaps.Add(1)
					}
				}
				if i%10 == 0 && n%8 == 0 {
					time.Sleep(100 * time.Microsecond) // a slow reader: makes gaps
				}
			}
			if f.next != lines+1 || f.seen+f.lost != lines {
				t.Errorf("reader %d ended at seq %d with %d seen + %d lost, want %d, %d in all", i, f.next-1, f.seen, f.lost, lines, lines)
			}
			seen.Add(f.seen)
			lost.Add(f.lost)
		})
	}
	for i := range lines {
		r.Append([]Stream{Stdout, Stderr}[i%2], "line")
	}
	r.Close()
	wg.Wait()
	t.Logf("%d readers: %d entries seen, %d lost in %d gaps", readers, seen.Load(), lost.Load(), gaps.Load())
}

// TestWriterNeverBlocks: 100 cursors that never read and 100 readers that
// were woken once and then stopped reading do not stop Append. Inside a
// synctest bubble, an Append that blocked would fail the test as a
// deadlock instead of hanging it.
func TestWriterNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{})
		idle := make([]*Cursor, 100)
		for i := range idle {
			idle[i] = r.Cursor(0)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup // the stalled readers
		for range 100 {
			c := r.Cursor(0)
			wg.Go(func() {
				<-c.Ready()
				<-ctx.Done() // stalled: never reads again
			})
		}
		synctest.Wait() // all 100 wait on the ring
		for range 100_000 {
			r.Append(Stdout, "x")
		}
		if r.Last() != 100_000 || r.Len() != DefaultMaxEntries {
			t.Errorf("after 1e5 appends: Last, Len = %d, %d; want 100000, %d", r.Last(), r.Len(), DefaultMaxEntries)
		}
		for i, c := range idle {
			batch, err := c.Next(ctx)
			if err != nil || batch[0].Gap == nil || *batch[0].Gap != (Gap{Lost: 99_000, Resume: 99_001}) {
				t.Fatalf("idle cursor %d: Next() = %v, %v; want a gap of 99000 first", i, seqs(batch), err)
			}
		}
		cancel()
		wg.Wait()
	})
}

// TestAppendAllocs: Append does no allocation per reader: with 100 idle
// cursors it allocates nothing at all.
func TestAppendAllocs(t *testing.T) {
	r := New(Options{})
	for range 100 {
		r.Cursor(0)
	}
	appendN(r, DefaultMaxEntries) // the buffer is grown
	r.Wait(r.Last())              // a waiter that was woken and went away
	if got := testing.AllocsPerRun(1000, func() { r.Append(Stdout, "line") }); got != 0 {
		t.Errorf("Append allocs with 100 idle cursors = %v, want 0", got)
	}
}
