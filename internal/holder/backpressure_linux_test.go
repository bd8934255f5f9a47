package holder

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHolderBackpressure: a spool that can take no more (here a file-size
// limit on the holder, whose writes then fail with EFBIG) stops the
// holder reading: the child blocks on its pipe, the state file says why,
// and nothing is dropped; flyd's acks give the room back, and every line
// arrives once.
func TestHolderBackpressure(t *testing.T) {
	const n = 100_000
	dir, st := startHolderWith(t, 0, 4<<20)
	limit := unix.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := unix.Prlimit(st.Holder.PID, unix.RLIMIT_FSIZE, &limit, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	c, err := Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(fmt.Appendf(nil, "flood %d\n", n)); err != nil {
		t.Fatal(err)
	}
	c.Close() // flyd is away: nothing acks
	var s State
	eventually(t, "the state file saying the spool is full", func() bool {
		s, _ = ReadState(dir)
		return s.Spool != ""
	})
	t.Logf("spool full: %s", s.Spool)
	texts, _, torn := readAll(t, dir, 0)
	if torn {
		t.Error("a failed write left a torn record in the spool")
	}
	if len(texts) >= n+n/10 {
		t.Fatalf("the spool took all %d lines under a 256 KiB limit", len(texts))
	}
	if !st.Child.Same() {
		t.Fatal("the child died of backpressure")
	}

	c, err = Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var col collected
	full := false
	deadline := time.Now().Add(20 * time.Second)
	for len(col.out) < n || len(col.errs) < n/10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines after a minute; last seq %d", len(col.out), col.last)
		}
		m, err := c.Next()
		if err != nil {
			t.Fatalf("Next after %d lines: %v", len(col.out), err)
		}
		switch {
		case m.Spool != nil || m.Ping:
			// A full spool waits for flyd's acks: flyd acks what it has
			// committed when it hears so (and at every ping).
			full = full || (m.Spool != nil && m.Spool.Full)
			if col.last > 0 {
				_ = c.Ack(col.last)
			}
			continue
		case m.Seq != col.last+1:
			t.Fatalf("seq %d after %d", m.Seq, col.last)
		}
		col.last = m.Seq
		if m.Type == TypeStdout {
			col.out = append(col.out, string(m.Data))
		} else {
			col.errs = append(col.errs, string(m.Data))
		}
		if !c.Buffered() {
			_ = c.Ack(col.last) // what flyd does once it has committed them
		}
	}
	for i, l := range col.out {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("line %d is %q", i+1, l)
		}
	}
	if !full {
		t.Error("flyd was not told the spool was full")
	}
	os.Stdout.Sync()
}
