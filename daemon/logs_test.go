package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/store"
)

// TestEntriesStitchStoreAndRing: reading a log from seq 0 when the ring
// holds the newest 10 entries and the store the newest 40 gives one gap
// for what neither keeps, then every kept seq exactly once, in order.
func TestEntriesStitchStoreAndRing(t *testing.T) {
	a := newAPIServer(t, Config{RingEntries: 10}, store.Options{MaxLogEntries: 40}, false)
	r := a.start(t, fakeflutter.EnvLines+"=200", fakeflutter.EnvTickMS+"=1")
	waitLog(t, r, "flutter: tick 200")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored, _ := a.db.LogStats(r.id)
	last := r.ring.Last()

	for _, limit := range []int{1000, 7} { // one page, and many small ones
		var got []uint64
		var gaps int
		since := uint64(0)
		for since < last {
			page := r.entries(logQuery{since: since, limit: limit})
			if len(page.entries) == 0 {
				t.Fatalf("limit %d: empty page after seq %d of %d", limit, since, last)
			}
			for _, e := range page.entries {
				if e.Gap != nil {
					gaps++
					if e.Gap.Resume != stored.FirstSeq || e.Gap.Lost != stored.FirstSeq-1 {
						t.Errorf("limit %d: gap %+v, want %d lost resuming at %d", limit, *e.Gap, stored.FirstSeq-1, stored.FirstSeq)
					}
					continue
				}
				got = append(got, e.Seq)
			}
			since = page.next
		}
		if gaps != 1 {
			t.Errorf("limit %d: %d gap entries, want 1", limit, gaps)
		}
		for i, seq := range got {
			if want := stored.FirstSeq + uint64(i); seq != want {
				t.Fatalf("limit %d: entry %d has seq %d, want %d (contiguous from the store's first)", limit, i, seq, want)
			}
		}
		if n := uint64(len(got)); n != last-stored.FirstSeq+1 {
			t.Errorf("limit %d: %d entries, want %d", limit, n, last-stored.FirstSeq+1)
		}
	}
}
