package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// benchLines are log lines of typical lengths: flutter output, from a few
// bytes to a long stack frame.
func benchLines() []string {
	lines := make([]string, 64)
	for i := range lines {
		lines[i] = fmt.Sprintf("I/flutter (%5d): frame %d %s", 1000+i, i, strings.Repeat("ab", i*3))
	}
	return lines
}

// BenchmarkGroupCommit measures log entries per second through Append and
// Flush (three runs, the writer's group commit, fsync on), and the same
// entries written by bareLog, a plain bbolt loop, on another file in the
// same run. The two alternate in chunks, so that both see the same disk
// weather. It reports both rates and ratio = store rate / bare rate. When
// the queue is full the producer retries after a short sleep, so the
// store's rate is the sustained one.
func BenchmarkGroupCommit(b *testing.B) {
	const runs = 3
	lines := benchLines()
	dir := b.TempDir()
	// No log cap: the bare loop does not trim either.
	db, err := Open(filepath.Join(dir, "store.db"), Options{MaxLogEntries: 1 << 40, MaxLogBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Run(ctx) }() // ended by cancel below
	defer func() { cancel(); <-done }()
	ids := make([]string, runs)
	for r := range ids {
		ids[r] = NewRunID()
		if err := db.PutRun(Record{ID: ids[r], State: StateRunning}); err != nil {
			b.Fatal(err)
		}
	}
	bare := openBareLog(b, filepath.Join(dir, "bare.db"), runs, lines)
	defer bare.db.Close()

	chunk := max(b.N/8, 4096)
	var storeTime, bareTime time.Duration
	b.ResetTimer()
	for first := 0; first < b.N; first += chunk {
		last := min(first+chunk, b.N)

		start := time.Now()
		for i := first; i < last; i++ {
			e := Entry{Seq: uint64(i/runs + 1), Stream: "stdout", Text: lines[i%len(lines)]}
			for db.Append(ids[i%runs], e) != nil {
				time.Sleep(10 * time.Microsecond) // the queue is full
			}
		}
		if err := db.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		storeTime += time.Since(start)

		b.StopTimer()
		start = time.Now()
		bare.write(b, first, last)
		bareTime += time.Since(start)
		b.StartTimer()
	}
	storeRate := float64(b.N) / storeTime.Seconds()
	bareRate := float64(b.N) / bareTime.Seconds()
	b.ReportMetric(storeRate, "entries/s")
	b.ReportMetric(bareRate, "bare-entries/s")
	b.ReportMetric(storeRate/bareRate, "ratio")
}

// bareLog is the baseline: log entries written straight to a bbolt file
// with the store's settings (fsync on, hashmap freelist) by a plain loop
// of one Update per MaxBatch entries. Entry i goes to run i%runs, under the
// big-endian key i/runs+1 in that run's bucket; its value is the time in
// unix nanoseconds, a stream byte and the text. There is no queue, no
// goroutine and no counters.
type bareLog struct {
	db      *bolt.DB
	buckets [][]byte
	lines   []string
}

func openBareLog(b *testing.B, path string, runs int, lines []string) *bareLog {
	db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	l := &bareLog{db: db, lines: lines}
	for r := range runs {
		l.buckets = append(l.buckets, []byte(fmt.Sprint("run", r)))
	}
	return l
}

// write stores entries first to last-1.
func (l *bareLog) write(b *testing.B, first, last int) {
	runs := len(l.buckets)
	for batch := first; batch < last; batch += MaxBatch {
		err := l.db.Update(func(tx *bolt.Tx) error {
			for i := batch; i < min(batch+MaxBatch, last); i++ {
				bucket, err := tx.CreateBucketIfNotExists(l.buckets[i%runs])
				if err != nil {
					return err
				}
				bucket.FillPercent = 1
				key := binary.BigEndian.AppendUint64(nil, uint64(i/runs+1))
				value := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
				value = append(value, 1) // stdout
				value = append(value, l.lines[i%len(l.lines)]...)
				if err := bucket.Put(key, value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
