package logring_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fly-dev/fly/logring"
)

// A reader that fell behind a three-entry ring gets one gap entry, then
// the entries held, then io.EOF once the run has ended.
func ExampleCursor() {
	r := logring.New(logring.Options{MaxEntries: 3})
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		r.Append(logring.Stdout, s)
	}
	r.Close()
	c := r.Cursor(0)
	for {
		batch, err := c.Next(context.Background())
		if err == io.EOF {
			break
		}
		for _, e := range batch {
			fmt.Println(e.Seq, e.Stream, e.Text)
		}
	}
	// Output:
	// 2 fly … 2 lines lost (evicted before they were read); resuming at seq 3
	// 3 stdout c
	// 4 stdout d
	// 5 stdout e
}

// After a restart, a run's ring is rebuilt from its persisted entries and
// its seq goes on where it stopped.
func ExampleRestore() {
	persisted := []logring.Entry{
		{Seq: 41, Stream: logring.Stdout, Text: "Syncing files to device..."},
		{Seq: 42, Stream: logring.Stdout, Text: "Flutter run key commands."},
	}
	r, err := logring.Restore(logring.Options{}, persisted)
	if err != nil {
		fmt.Println(err)
		return
	}
	e := r.Append(logring.Fly, "flyd restarted; run interrupted")
	fmt.Println(r.First(), e.Seq)
	// Output: 41 43
}

// Coalescing change notifications: at most one per 50 ms however fast the
// run logs, and none missed, because Wait checks and subscribes in one
// step. Here the run has already logged 1000 lines and ended by the time
// the loop starts, so it sends one notification and returns.
func ExampleRing_Wait() {
	r := logring.New(logring.Options{})
	for range 1000 {
		r.Append(logring.Stdout, "line")
	}
	r.Close()

	notify := func(last uint64) { fmt.Println("updated up to", last) }
	ctx := context.Background()
	var seen uint64 // the last seq the subscriber was told about
	for {
		select {
		case <-r.Wait(seen):
		case <-ctx.Done():
			return
		}
		if last := r.Last(); last != seen {
			seen = last
			notify(seen)
		} else if r.Closed() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Output: updated up to 1000
}
