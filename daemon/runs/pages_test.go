package runs

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/store"
)

// TestEntriesStitchStoreAndRing: reading a log from seq 0 when the ring
// holds the newest 10 entries and the store the newest 40 gives one gap
// for what neither keeps, then every kept seq exactly once, in order.
func TestEntriesStitchStoreAndRing(t *testing.T) {
	e, db := newEngineWith(t, Config{StopGrace: time.Second, RingEntries: 10}, store.Options{MaxLogEntries: 40})
	r := startApp(t, e, fakeflutter.EnvLines, "200", fakeflutter.EnvTickMS, "1")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 200")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored, _ := db.LogStats(r.ID())
	last := r.Ring().Last()

	for _, limit := range []int{1000, 7} { // one page, and many small ones
		var got []uint64
		var gaps int
		since := uint64(0)
		for since < last {
			page := r.Entries(Query{Since: since, Limit: limit})
			if len(page.Entries) == 0 {
				t.Fatalf("limit %d: empty page after seq %d of %d", limit, since, last)
			}
			for _, e := range page.Entries {
				if e.Gap != nil {
					gaps++
					if e.Gap.Resume != stored.FirstSeq || e.Gap.Lost != stored.FirstSeq-1 {
						t.Errorf("limit %d: gap %+v, want %d lost resuming at %d", limit, *e.Gap, stored.FirstSeq-1, stored.FirstSeq)
					}
					continue
				}
				got = append(got, e.Seq)
			}
			since = page.Next
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

// TestLogPagesWithinBudget reads a 3000-line log the way logs_read does:
// by default the newest entries within the budget; paging back with
// before, or forward with since, returns every entry exactly once.
func TestLogPagesWithinBudget(t *testing.T) {
	e, _ := newEngineWith(t, Config{StopGrace: time.Second, RingEntries: 500}, store.Options{})
	r := startApp(t, e, fakeflutter.EnvLines, "3000", fakeflutter.EnvLinesPerSec, "0")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 3000")
	ctx := t.Context()
	const budget = 16 << 10

	newest := r.BackwardPage(ctx, 0, Select{}, budget, 0)
	if n := len(strings.Join(newest.Lines, "\n")); n > budget || n < budget/2 {
		t.Errorf("default page holds %d bytes, want most of the %d budget", n, budget)
	}
	if !newest.Truncated || !strings.Contains(newest.Lines[len(newest.Lines)-1]+newest.Lines[len(newest.Lines)-2], "tick 3000") {
		t.Errorf("default page: truncated %v, last lines %q, want the newest entries and truncated", newest.Truncated, newest.Lines[len(newest.Lines)-2:])
	}

	collect := func(lines []string, into map[uint64]int) {
		for _, l := range lines {
			seq, _, _ := strings.Cut(l, " ")
			n, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				t.Fatalf("line %q has no seq", l)
			}
			into[n]++
		}
	}
	back := map[uint64]int{}
	pg := newest
	for pages := 0; ; pages++ {
		collect(pg.Lines, back)
		if !pg.Truncated {
			break
		}
		if pages > 1000 {
			t.Fatal("paging back does not end")
		}
		pg = r.BackwardPage(ctx, pg.From, Select{}, budget, 0)
	}
	fwd := map[uint64]int{}
	since := uint64(0)
	for pages := 0; ; pages++ {
		pg := r.ForwardPage(ctx, since, Select{}, budget, 0)
		collect(pg.Lines, fwd)
		if !pg.Truncated {
			break
		}
		if pages > 1000 {
			t.Fatal("paging forward does not end")
		}
		since = pg.Next
	}
	last := r.Ring().Last()
	for seq := uint64(1); seq <= last; seq++ {
		if back[seq] != 1 || fwd[seq] != 1 {
			t.Fatalf("seq %d returned %d times paging back, %d paging forward; want once each", seq, back[seq], fwd[seq])
		}
	}

	grep := regexp.MustCompile(`tick 1\d\d\d$`)
	g := r.BackwardPage(ctx, 0, Select{Grep: grep}, budget, 5)
	if len(g.Lines) != 5 || !strings.HasSuffix(g.Lines[4], "tick 1999") || !g.Truncated {
		t.Errorf("grep with tail 5 = %q (truncated %v), want ticks 1995..1999", g.Lines, g.Truncated)
	}
}

// startApp runs `flutter run --machine` in a new project, steered by vars
// (name, value pairs), and waits until the app has started.
func startApp(t *testing.T, e *Engine, vars ...string) *Run {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Start(context.Background(), Spec{Kind: store.KindRun, Root: root, Env: fakeEnv(vars...), Args: []string{"run", "--machine"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Started():
	case <-time.After(30 * time.Second):
		t.Fatalf("run %s did not start within 30s", r.ID())
	}
	return r
}
