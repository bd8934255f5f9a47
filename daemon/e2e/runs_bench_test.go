package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/store"
	bolt "go.etcd.io/bbolt"
)

// benchIngestLines is how many lines one ingest iteration floods.
const benchIngestLines = 200_000

// BenchmarkIngest: a fake flutter printing app.log lines as fast as it can,
// through flyd's reader, parser, ring and group-committed store, against a
// bare bbolt loop that commits the same number of entries store.MaxBatch per fsync'd
// transaction. flyd's time runs from the moment its reader took the first
// app.log line (that entry's time) to the moment the last one is on disk:
// the child's start and its build phase are not ingest. Reports lines/s
// of each, persisted, and ratio = flyd/bare (goal ≥ 0.8). Lines the store
// had to drop are reported too (there are none: the child waits instead).
func BenchmarkIngest(b *testing.B) {
	dir := b.TempDir()
	flutter, err := fakeflutter.Install(dir)
	if err != nil {
		b.Fatal(err)
	}
	eng, db := benchEngine(b, dir, runs.Config{Flutter: flutter, RingEntries: 1000, StopGrace: daemon.DefaultConfig().StopGrace})
	root := b.TempDir()

	var flyd, bare time.Duration
	var persisted, dropped, bareN uint64
	b.ResetTimer()
	for i := range b.N {
		r, err := eng.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: root, Args: []string{"run", "--machine"},
			Env: map[string]string{"FLY_TEST_HELPER": "flutter", fakeflutter.EnvLinesPerSec: "0", fakeflutter.EnvLines: fmt.Sprint(benchIngestLines)}})
		if err != nil {
			b.Fatal(err)
		}
		last := fmt.Sprintf("flutter: tick %d", benchIngestLines)
		for seen := uint64(0); !strings.HasPrefix(lastText(r), last); seen = r.Ring().Last() {
			select {
			case <-r.Ring().Wait(seen):
			case <-time.After(time.Minute):
				b.Fatal("the flood did not end within a minute")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		end := time.Now()
		first, err := db.Logs(r.ID(), 0, 100)
		if err != nil {
			b.Fatal(err)
		}
		i0 := slices.IndexFunc(first, func(e store.Entry) bool { return e.Text == "flutter: tick 1" })
		if i0 < 0 {
			b.Fatal("the first app.log line is not in the store")
		}
		flyd += end.Sub(first[i0].Time)
		meta, _ := db.LogStats(r.ID())
		persisted += meta.LastSeq - first[i0].Seq + 1 - meta.Dropped
		dropped += meta.Dropped
		_ = r.Stop(context.Background())

		n := int(meta.LastSeq - first[i0].Seq + 1)
		bare += bareIngest(b, filepath.Join(dir, fmt.Sprintf("bare%d.db", i)), n)
		bareN += uint64(n)
	}
	n := float64(b.N)
	flydRate := float64(persisted) / flyd.Seconds()
	bareRate := float64(bareN) / bare.Seconds()
	b.ReportMetric(flydRate, "lines/s-flyd")
	b.ReportMetric(bareRate, "lines/s-bare")
	b.ReportMetric(flydRate/bareRate, "ratio")
	b.ReportMetric(float64(dropped)/n, "dropped/op")
}

func lastText(r *runs.Run) string {
	t := r.Ring().Tail(4)
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].Stream == "stdout" {
			return t[i].Text
		}
	}
	return ""
}

// bareIngest commits n log-sized entries to a fresh bbolt file, store.MaxBatch per
// Update, the way the store's writer does, and returns the time it took.
func bareIngest(b *testing.B, path string, n int) time.Duration {
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(path)
	defer bdb.Close()
	text := []byte("flutter: tick 123456 at the bare baseline")
	start := time.Now()
	for seq := 1; seq <= n; {
		err := bdb.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("run"))
			if err != nil {
				return err
			}
			bk.FillPercent = 1
			for end := min(n, seq+store.MaxBatch-1); seq <= end; seq++ {
				k := binary.BigEndian.AppendUint64(nil, uint64(seq))
				v := binary.BigEndian.AppendUint64([]byte{1}, uint64(time.Now().UnixNano()))
				if err := bk.Put(k, append(v, text...)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchEngine is flyd's runs engine as the daemon configures it with cfg,
// over a store of its own in dir with the store's writer running, as
// Server.Run runs them; b's cleanup stops every run and the store. No
// log cap, as in store's BenchmarkGroupCommit: the bare loop does not
// trim either, and the first line must stay to be timed.
func benchEngine(b *testing.B, dir string, cfg runs.Config) (*runs.Engine, *store.DB) {
	eng := runs.New(cfg, slog.New(slog.DiscardHandler), nil)
	db, err := store.Open(filepath.Join(dir, "fly.db"), store.Options{MaxLogEntries: 1 << 40, MaxLogBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Open(db, ""); err != nil {
		db.Close()
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	written := make(chan error, 1)
	go func() { written <- db.Run(ctx) }() // owned by the cleanup below: stopped and waited for
	b.Cleanup(func() {
		eng.CloseAll()
		cancel()
		<-written
		db.Close()
	})
	return eng, db
}
