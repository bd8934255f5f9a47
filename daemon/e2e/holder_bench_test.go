package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/store"
)

// BenchmarkHeldIngest: the same floods of stamped app.log lines through a
// run flyd holds itself (its pipes) and through a run under its holder
// (flyd hold: the spool, then the control connection), each through
// flyd's runs engine and group-committed store, in the same iteration.
// Throughput: benchIngestLines lines as fast as the child prints them,
// lines/s from the first line's print to the last on disk; ratio =
// held/direct (goal ≥ 0.83, within 1.2×). Latency: heldPacedLines lines
// at heldPacedRate a second (a busy app, below what either path can
// take), p99 from the child's print to a subscriber of the run's ring;
// ratio-p99 = held/direct (goal ≤ 1.2).
func BenchmarkHeldIngest(b *testing.B) {
	flyd, _ := flytest.Binaries(b)
	var rate [2]float64
	var lat [2][]time.Duration
	for range b.N {
		for i, held := range []bool{false, true} {
			if only := os.Getenv("FLY_BENCH_ONLY"); only != "" && only != map[bool]string{false: "direct", true: "held"}[held] {
				continue // one path only, for a profile of it
			}
			r, _ := heldIngestOnce(b, flyd, held, benchIngestLines, 0)
			rate[i] += r
			_, l := heldIngestOnce(b, flyd, held, heldPacedLines, heldPacedRate)
			lat[i] = append(lat[i], l...)
		}
	}
	if len(lat[0]) == 0 || len(lat[1]) == 0 {
		return // one path only (FLY_BENCH_ONLY=held or direct)
	}
	n := float64(b.N)
	b.ReportMetric(rate[0]/n, "lines/s-direct")
	b.ReportMetric(rate[1]/n, "lines/s-held")
	b.ReportMetric(rate[1]/rate[0], "ratio")
	b.ReportMetric(float64(p99(lat[0]).Microseconds()), "p99-µs-direct")
	b.ReportMetric(float64(p99(lat[1]).Microseconds()), "p99-µs-held")
	b.ReportMetric(float64(p99(lat[1]))/float64(p99(lat[0])), "ratio-p99")
}

// The paced flood of BenchmarkHeldIngest's latency.
const (
	heldPacedLines = 20_000
	heldPacedRate  = 20_000
)

// heldIngestOnce floods lines lines, perSec a second (0: as fast as it
// can), through an engine of its own, held or not, and returns the
// lines/s to disk and each line's latency to a subscriber.
func heldIngestOnce(b *testing.B, flyd string, held bool, lines, perSec int) (float64, []time.Duration) {
	dir := b.TempDir()
	flutter, err := fakeflutter.Install(dir)
	if err != nil {
		b.Fatal(err)
	}
	cfg := runs.Config{Flutter: flutter, RingEntries: 1000, StopGrace: daemon.DefaultConfig().StopGrace}
	if held {
		p := paths.Paths{Socket: filepath.Join(dir, "flyd.sock"), StateDir: dir}
		cfg.Holders = &runs.Holders{Exe: flyd, Dir: p.Runs(), Control: p.RunControl}
	}
	eng, db := benchEngine(b, dir, cfg)

	r, err := eng.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: b.TempDir(), Args: []string{"run", "--machine"},
		Env: map[string]string{"FLY_TEST_HELPER": "flutter", fakeflutter.EnvLinesPerSec: strconv.Itoa(perSec), fakeflutter.EnvStamp: "1",
			fakeflutter.EnvLines: strconv.Itoa(lines)}})
	if err != nil {
		b.Fatal(err)
	}
	// The subscriber: every entry's latency from its print, as it comes.
	last := fmt.Sprintf("flutter: tick %d ", lines)
	lat := make([]time.Duration, 0, lines)
	var first time.Time
	cur := r.Ring().Cursor(0)
	for done := false; !done; {
		select {
		case <-cur.Ready():
		case <-time.After(time.Minute):
			b.Fatal("the flood did not end within a minute")
		}
		batch, err := cur.Next(context.Background())
		if err != nil {
			b.Fatalf("the run's log ended before its flood: %v", err)
		}
		now := time.Now()
		for _, e := range batch {
			m := stampRE.FindStringSubmatch(e.Text)
			if m == nil {
				continue
			}
			ns, _ := strconv.ParseInt(m[1], 10, 64)
			at := time.Unix(0, ns)
			if first.IsZero() {
				first = at
			}
			lat = append(lat, now.Sub(at))
			done = done || strings.HasPrefix(e.Text, last)
		}
	}
	fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
	defer fcancel()
	if err := db.Flush(fctx); err != nil {
		b.Fatal(err)
	}
	took := time.Since(first)
	_ = r.Stop(context.Background())
	return float64(len(lat)) / took.Seconds(), lat
}

// BenchmarkRunsLiveAgain: ten held runs; flyd stops (its runs go on), and
// the time from the next flyd's start to all ten live again (each listed
// running and its log saying it was taken back from its holder) against the time from the same
// flyd's start to its first answer with no runs to take back, measured in
// the same iteration. Reports ms-live-again (goal < 1000) and ms-empty.
func BenchmarkRunsLiveAgain(b *testing.B) {
	const n = 10
	var again, empty time.Duration
	for range b.N {
		e := flytest.NewEnv(b)
		e.WithFakeFlutter(b, fakeflutter.EnvTickMS+"=100")
		d := flytest.StartFlyd(b, e, "--max-runs", "16")
		root := flutterProject(b)
		cs := viaShimNoStart(e)(b, "bench", root, nil)
		ids := make([]string, 0, n)
		for range n {
			var started mcpserver.RunResult
			if res := callTool(b, cs, "flutter_run", nil, &started); res.IsError {
				b.Fatalf("flutter_run: %s", toolText(res))
			}
			ids = append(ids, started.RunID)
		}
		cs.Close()
		d.Stop(b)

		t0 := time.Now()
		d = flytest.StartFlyd(b, e, "--max-runs", "16")
		flytest.Eventually(b, "ten runs live again", func() bool { return liveHeld(b, e, ids) })
		again += time.Since(t0)
		d.Stop(b)
		flytest.KillHolders(e.Paths.Runs())

		e2 := flytest.NewEnv(b)
		t0 = time.Now()
		d = flytest.StartFlyd(b, e2)
		if _, err := getStatus(e2); err != nil {
			b.Fatal(err)
		}
		empty += time.Since(t0)
		d.Stop(b)
	}
	b.ReportMetric(float64(again.Milliseconds())/float64(b.N), "ms-live-again")
	b.ReportMetric(float64(empty.Milliseconds())/float64(b.N), "ms-empty")
}

// liveHeld reports whether every run of ids is taken back from its
// holder in e's flyd: its connection to the holder up (its log says so)
// and the run listed running.
func liveHeld(b *testing.B, e *flytest.Env, ids []string) bool {
	st, err := getStatus(e)
	if err != nil {
		return false
	}
	live := map[string]bool{}
	for _, r := range st.Runs {
		if r.State == "running" && r.Holder == "holder" {
			live[r.RunID] = true
		}
	}
	for _, id := range ids {
		if !live[id] {
			return false
		}
		back := false
		for _, l := range logLines(b, e, id, 20) {
			back = back || strings.Contains(l.Text, "took this run back from its holder")
		}
		if !back {
			return false
		}
	}
	return true
}
