package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/store"
)

// BenchmarkFanout: a fake flutter prints stamped lines at 10k lines/s;
// 1, 10 and 100 NDJSON followers on flyd's Unix socket each time every
// line from the child's print to its arrival. Reports p50 and p99 in µs
// (goal: p99 ≤ 3 ms at 100 followers). The followers run in this process,
// so they compete with flyd for the same two cores.
func BenchmarkFanout(b *testing.B) {
	const rate, lines = 10_000, 20_000
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			a := newAPIServer(b, Config{}, store.Options{}, true)
			var all []time.Duration
			for b.Loop() {
				r := a.start(b, fakeflutter.EnvLinesPerSec+"="+strconv.Itoa(rate), fakeflutter.EnvLines+"="+strconv.Itoa(lines),
					fakeflutter.EnvStamp+"=1", fakeflutter.EnvStartupMS+"=1500")
				all = append(all, followAll(b, a, r.ID(), n, lines)...)
				_ = r.Stop(b.Context())
			}
			slices.Sort(all)
			if len(all) == 0 {
				b.Fatal("no latencies measured")
			}
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(len(all))/float64(b.N), "deliveries/op")
		})
	}
}

// followAll connects n followers to the run's live log and returns the
// latency of every stamped line each of them received.
func followAll(b *testing.B, a *apiServer, id string, n, lines int) []time.Duration {
	last := fmt.Sprintf("flutter: tick %d ", lines)
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			resp, err := a.c.Get(a.url + "/v1/runs/" + id + "/logs?tail=0&follow=1")
			if err != nil {
				b.Error(err)
				ready <- struct{}{}
				return
			}
			defer resp.Body.Close()
			ready <- struct{}{}
			if resp.StatusCode != http.StatusOK {
				b.Errorf("follow: %s", resp.Status)
				return
			}
			lat := make([]time.Duration, 0, lines)
			sc := bufio.NewScanner(resp.Body)
			done := []byte(last)
			for sc.Scan() {
				now := time.Now()
				// The followers share the two cores with flyd: find the
				// stamp without decoding the line.
				line := sc.Bytes()
				i := bytes.Index(line, []byte(" at="))
				if i < 0 || !bytes.HasPrefix(line, []byte(`{"type":"entry"`)) {
					continue
				}
				j := i + 4
				for j < len(line) && line[j] >= '0' && line[j] <= '9' {
					j++
				}
				if ns, err := strconv.ParseInt(string(line[i+4:j]), 10, 64); err == nil {
					lat = append(lat, now.Sub(time.Unix(0, ns)))
				}
				if bytes.Contains(line, done) {
					break
				}
			}
			mu.Lock()
			out = append(out, lat...)
			mu.Unlock()
		})
	}
	for range n {
		<-ready
	}
	wg.Wait()
	return out
}
