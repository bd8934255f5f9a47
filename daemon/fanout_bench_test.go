package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
			a := newAPIServer(b, Config{}, store.Options{}, true)
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

// BenchmarkFanoutSubscribers: 100 MCP sessions over WebSocket subscribe to
// a run's log resource while the fake flutter prints a stamped line every
// 100 ms; each session times the line's print to its
// notifications/resources/updated, reading the log's last line to learn
// the stamp. Reports p50 and p99 in µs (goal ≤ 3 ms). Each line is the
// first after a quiet spell (the first tick, which follows the lines of
// the app's start within 50 ms, is not timed): a log that grows faster is
// announced to a session at most every 50 ms (logUpdateEvery) by design,
// so that the agents behind the sessions read it in batches.
func BenchmarkFanoutSubscribers(b *testing.B) {
	const sessions, lines = 100, 30
	a := newAPIServer(b, Config{}, store.Options{}, true)
	var all []time.Duration
	for b.Loop() {
		r := a.start(b, fakeflutter.EnvTickMS+"=100", fakeflutter.EnvLines+"="+strconv.Itoa(lines),
			fakeflutter.EnvStamp+"=1", fakeflutter.EnvStartupMS+"=2000")
		uri := "logs://run/" + r.ID()
		var mu sync.Mutex
		var wg sync.WaitGroup
		ready := make(chan struct{}, sessions)
		for range sessions {
			updated := make(chan time.Time, 1000)
			c := mcp.NewClient(&mcp.Implementation{Name: "subscriber", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updated <- time.Now() },
			})
			cs, err := c.Connect(b.Context(), apiWS{a}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := cs.Subscribe(b.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				defer cs.Close()
				ready <- struct{}{}
				var lat []time.Duration
				for seen := 0; seen < lines; {
					var at time.Time
					select {
					case at = <-updated:
					case <-time.After(time.Minute):
						b.Error("no notification for a minute")
						return
					}
					res, err := cs.ReadResource(b.Context(), &mcp.ReadResourceParams{URI: uri + "?tail=1"})
					if err != nil {
						b.Error(err)
						return
					}
					text := res.Contents[0].Text
					i := strings.LastIndex(text, " at=")
					j := strings.LastIndex(text, "flutter: tick ")
					if i < 0 || j < 0 {
						continue // a line of the fake's start
					}
					ns, err := strconv.ParseInt(strings.TrimSpace(text[i+4:]), 10, 64)
					if err != nil {
						continue
					}
					seen, _ = strconv.Atoi(strings.Fields(text[j+len("flutter: tick "):])[0])
					if seen > 1 { // the first tick follows the start's own lines within 50 ms
						lat = append(lat, at.Sub(time.Unix(0, ns)))
					}
				}
				mu.Lock()
				all = append(all, lat...)
				mu.Unlock()
			})
		}
		for range sessions {
			<-ready
		}
		wg.Wait()
		_ = r.Stop(b.Context())
	}
	if len(all) == 0 {
		b.Fatal("no latencies measured")
	}
	b.ReportMetric(float64(p50(all).Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99(all).Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(all))/float64(b.N), "notifications/op")
}

// apiWS connects an MCP client to an apiServer's WebSocket endpoint.
type apiWS struct{ a *apiServer }

func (w apiWS) Connect(ctx context.Context) (mcp.Connection, error) {
	c, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient: w.a.c, Subprotocols: []string{wire.Subprotocol},
		HTTPHeader: http.Header{wire.HeaderWorkspace: {url.QueryEscape(w.a.root)}, wire.HeaderVersion: {wire.VersionHeader()}},
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return mcpconn.NewWebSocket(c, "subscriber", 5*time.Second), nil
}
