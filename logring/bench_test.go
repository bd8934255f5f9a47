package logring

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func BenchmarkAppend(b *testing.B) {
	line := strings.Repeat("x", 80)
	long := strings.Repeat("y", 20<<10)
	b.Run("line", func(b *testing.B) {
		r := New(Options{})
		b.ReportAllocs()
		for b.Loop() {
			r.Append(Stdout, line)
		}
	})
	b.Run("idle-cursors=100", func(b *testing.B) {
		r := New(Options{})
		for range 100 {
			r.Cursor(0)
		}
		b.ReportAllocs()
		for b.Loop() {
			r.Append(Stdout, line)
		}
	})
	b.Run("truncated", func(b *testing.B) {
		r := New(Options{})
		b.ReportAllocs()
		for b.Loop() {
			r.Append(Stdout, long)
		}
	})
}

// BenchmarkFanout: one writer appends as fast as it can while N cursors
// follow. ns/op is per appended entry, until every cursor has drained.
// It reports the wake latency from Append to the reader (p50, p99, over
// every 16th entry) and the fraction of entries readers lost to gaps
// because the unpaced writer lapped them.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("cursors=%d", n), func(b *testing.B) {
			benchFanout(b, n, 0)
		})
	}
}

// BenchmarkFanoutPaced: the same at 10k lines/s, the load of the daemon's
// fan-out goal (p99 ≤ 3 ms at 100 followers end to end).
func BenchmarkFanoutPaced(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("cursors=%d", n), func(b *testing.B) {
			benchFanout(b, n, 10_000)
		})
	}
}

func benchFanout(b *testing.B, readers, perSecond int) {
	r := New(Options{})
	lat := make([][]time.Duration, readers)
	lost := make([]uint64, readers)
	var wg sync.WaitGroup // the readers
	for i := range readers {
		c := r.Cursor(0)
		wg.Go(func() {
			for {
				batch, err := c.Next(b.Context())
				if err != nil {
					return
				}
				now := time.Now()
				for _, e := range batch {
					if e.Gap != nil {
						lost[i] += e.Gap.Lost
					} else if e.Seq%16 == 0 {
						lat[i] = append(lat[i], now.Sub(e.Time))
					}
				}
			}
		})
	}
	line := strings.Repeat("x", 80)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if perSecond > 0 && i%10 == 0 {
			// Bursts of 10 on a schedule, so sleep granularity does not skew the rate.
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(perSecond))))
		}
		r.Append(Stdout, line)
	}
	r.Close()
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	var lostAll uint64
	for i := range readers {
		all = append(all, lat[i]...)
		lostAll += lost[i]
	}
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)/2])/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100])/1e3, "p99-µs")
	}
	b.ReportMetric(float64(lostAll)/float64(b.N*readers), "lost/entry")
}
