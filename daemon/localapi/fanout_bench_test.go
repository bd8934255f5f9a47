package localapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
// line from the child's print to its arrival. The baseline is a bare
// in-process broadcast to the same followers: a goroutine prints the same
// lines at the same pace straight into each follower's channel, and a
// minimal handler writes them. Reports p50 and p99 in µs of both, and
// ratio-p99 = flyd/bare (goal: flyd's p99 ≤ 3 ms at 100 followers). The
// followers run in this process, so they compete with flyd for the same
// two cores.
func BenchmarkFanout(b *testing.B) {
	const rate, lines = 10_000, 20_000
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			a := newAPIServer(b, serverConfig{}, store.Options{}, true)
			bare := newBareBroadcast(b)
			var fly, base []time.Duration
			for b.Loop() {
				r := a.start(b, fakeflutter.EnvLinesPerSec+"="+strconv.Itoa(rate), fakeflutter.EnvLines+"="+strconv.Itoa(lines),
					fakeflutter.EnvStamp+"=1", fakeflutter.EnvStartupMS+"=1500")
				fly = append(fly, followAll(b, a.c, a.url+"/v1/runs/"+r.ID()+"/logs?tail=0&follow=1", n, lines, nil)...)
				_ = r.Stop(b.Context())
				base = append(base, followAll(b, bare.c, bare.url, n, lines, func() { bare.produce(rate, lines) })...)
			}
			if len(fly) == 0 || len(base) == 0 {
				b.Fatal("no latencies measured")
			}
			b.ReportMetric(float64(p50(fly).Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99(fly).Microseconds()), "p99-µs")
			b.ReportMetric(float64(p50(base).Microseconds()), "p50-µs-bare")
			b.ReportMetric(float64(p99(base).Microseconds()), "p99-µs-bare")
			b.ReportMetric(ratio(p99(fly), p99(base)), "ratio-p99")
			b.ReportMetric(float64(len(fly))/float64(b.N), "deliveries/op")
		})
	}
}

// bareBroadcast is BenchmarkFanout's baseline: the least a server can do
// to send one stream of lines to many HTTP followers.
type bareBroadcast struct {
	url string
	c   *http.Client
	mu  sync.Mutex
	chs []chan []byte
}

func newBareBroadcast(b *testing.B) *bareBroadcast {
	bb := &bareBroadcast{}
	dir, err := os.MkdirTemp("", "flybare") // short: socket paths are capped
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(bb.follow))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	b.Cleanup(hs.Close)
	bb.url = "http://bare/follow"
	bb.c = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return bb
}

// follow writes each line it is sent, and whatever else has arrived by
// then, then flushes.
func (bb *bareBroadcast) follow(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 1<<15)
	bb.mu.Lock()
	bb.chs = append(bb.chs, ch)
	bb.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	var buf []byte
	for {
		select {
		case <-r.Context().Done():
			return
		case l := <-ch:
			buf = append(buf[:0], l...)
		more:
			for {
				select {
				case l := <-ch:
					buf = append(buf, l...)
				default:
					break more
				}
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}
}

// produce prints lines stamped lines at rate per second, paced as the fake
// flutter paces them, into every follower's channel, then forgets the
// followers.
func (bb *bareBroadcast) produce(rate, lines int) {
	bb.mu.Lock()
	chs := bb.chs
	bb.chs = nil
	bb.mu.Unlock()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for n := 0; n < lines; {
		due := min(int(time.Since(start)/interval)+1, lines)
		for ; n < due; n++ {
			l := fmt.Appendf(nil, `{"type":"entry","seq":%d,"stream":"stdout","text":"flutter: tick %d at=%d"}`+"\n", n+1, n+1, time.Now().UnixNano())
			for _, ch := range chs {
				ch <- l
			}
		}
		// The sleep is the pace itself, as the fake flutter's timer is:
		// the next line is due at that time, not on any event.
		time.Sleep(time.Until(start.Add(time.Duration(n) * interval)))
	}
}

// followAll connects n followers to url, a live log, calls start once
// they are all connected, and returns the latency of every stamped line
// each of them received.
func followAll(b *testing.B, c *http.Client, url string, n, lines int, start func()) []time.Duration {
	last := fmt.Sprintf("flutter: tick %d ", lines)
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url)
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
	if start != nil {
		start()
	}
	wg.Wait()
	return out
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func p50(ds []time.Duration) time.Duration { return quantile(ds, 50) }
func p99(ds []time.Duration) time.Duration { return quantile(ds, 99) }

// quantile is the q-th percentile of ds.
func quantile(ds []time.Duration, q int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*q/100]
}
