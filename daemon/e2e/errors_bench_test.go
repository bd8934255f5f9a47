package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var stampRE = regexp.MustCompile(` at=(\d+)`)

// BenchmarkErrorLatency: the fake app posts a stamped Flutter.Error on
// its VM service every 200 ms and prints a stamped app.log line every
// 200 ms. 10 MCP sessions subscribe to the run's errors resource and its
// log; at each notifications/resources/updated a session reads the
// resource (what flutter_errors answers) and times the newest stamp to
// the notification. Reports p50 and p99 of each path in µs and
// ratio-p99 = error path / log path (goal ≤ 1.5).
func BenchmarkErrorLatency(b *testing.B) {
	const sessions, samples = 10, 25
	s, hc, root, _ := benchFlyd(b, daemon.Config{})
	var mu sync.Mutex
	var errLat, logLat []time.Duration
	for b.Loop() {
		r := startRun(b, s, root, fakeflutter.EnvTickMS+"=200", fakeflutter.EnvErrorEveryMS+"=200", fakeflutter.EnvStamp+"=1",
			fakeflutter.EnvStartupMS+"=1500")
		logURI, errURI := "logs://run/"+r.ID(), "fly://runs/"+r.ID()+"/errors"
		var wg sync.WaitGroup
		ready := make(chan struct{}, sessions)
		for range sessions {
			updated := make(chan [2]any, 1000)
			c := mcp.NewClient(&mcp.Implementation{Name: "subscriber", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					updated <- [2]any{req.Params.URI, time.Now()}
				},
			})
			cs, err := c.Connect(b.Context(), apiWS{hc, root}, nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, uri := range []string{logURI, errURI} {
				if err := cs.Subscribe(b.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
					b.Fatal(err)
				}
			}
			wg.Go(func() {
				defer cs.Close()
				ready <- struct{}{}
				var el, ll []time.Duration
				lastErr, lastLog := int64(0), int64(0)
				for len(el) < samples || len(ll) < samples {
					var u [2]any
					select {
					case u = <-updated:
					case <-time.After(time.Minute):
						b.Error("no notification for a minute")
						return
					}
					uri, at := u[0].(string), u[1].(time.Time)
					read := uri
					if uri == logURI {
						read += "?tail=4" // the error's own entry may follow the tick
					}
					res, err := cs.ReadResource(b.Context(), &mcp.ReadResourceParams{URI: read})
					if err != nil {
						b.Error(err)
						return
					}
					text := res.Contents[0].Text
					if uri == logURI && !strings.Contains(text, "flutter: tick") {
						continue // an error's text in the log, or a line of the start
					}
					if uri == logURI { // the newest tick
						text = text[strings.LastIndex(text, "flutter: tick"):]
					}
					m := stampRE.FindStringSubmatch(text) // the newest: errors are newest first
					if m == nil {
						continue
					}
					ns, _ := strconv.ParseInt(m[1], 10, 64)
					switch {
					case uri == errURI && ns > lastErr:
						lastErr = ns
						el = append(el, at.Sub(time.Unix(0, ns)))
					case uri == logURI && ns > lastLog:
						lastLog = ns
						ll = append(ll, at.Sub(time.Unix(0, ns)))
					}
				}
				mu.Lock()
				errLat, logLat = append(errLat, el[1:]...), append(logLat, ll[1:]...) // the first follows the start's burst
				mu.Unlock()
			})
		}
		for range sessions {
			<-ready
		}
		wg.Wait()
		_ = r.Stop(b.Context())
	}
	if len(errLat) == 0 || len(logLat) == 0 {
		b.Fatal("no latencies measured")
	}
	b.ReportMetric(float64(p50(errLat).Microseconds()), "err-p50-µs")
	b.ReportMetric(float64(p99(errLat).Microseconds()), "err-p99-µs")
	b.ReportMetric(float64(p50(logLat).Microseconds()), "log-p50-µs")
	b.ReportMetric(float64(p99(logLat).Microseconds()), "log-p99-µs")
	b.ReportMetric(float64(p99(errLat))/float64(p99(logLat)), "ratio-p99")
}

// BenchmarkErrorTokens: the bytes an agent reads from flutter_errors for
// 200 identical errors and for 20 distinct ones, against the 20,000
// characters of dart mcp-server's error ring (what its
// get_runtime_errors returns once errors fill it: dart-lang/ai#57, #134).
// Reports bytes and ratio = fly's bytes / 20,000 for each (goal ≤ 0.05
// for the identical ones).
func BenchmarkErrorTokens(b *testing.B) {
	const dartRing = 20000
	for _, tc := range []struct {
		name  string
		kinds string
		n     int
	}{
		{"identical200", "overflow", 200},
		{"distinct20", "", 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var bytes int
			for b.Loop() {
				bytes = errorAnswerBytes(b, tc.kinds, tc.n)
			}
			b.ReportMetric(float64(bytes), "bytes")
			b.ReportMetric(float64(bytes)/dartRing, "ratio")
		})
	}
}

// errorAnswerBytes runs an app that throws n errors at start (kinds, or
// with "" n distinct ones, by stamping each) and returns the bytes of
// flutter_errors' answer as it goes on the wire.
func errorAnswerBytes(b *testing.B, kinds string, n int) int {
	s, hc, root, _ := benchFlyd(b, daemon.Config{})
	vars := []string{fakeflutter.EnvTickMS + "=0"}
	if kinds != "" {
		vars = append(vars, fakeflutter.EnvErrorsAtStart+"="+strings.TrimSuffix(strings.Repeat(kinds+",", n), ","))
	} else { // distinct: the three kinds, each stamped with its time
		all := []string{"overflow", "nullcheck", "build"}
		var ks []string
		for i := range n {
			ks = append(ks, all[i%3])
		}
		vars = append(vars, fakeflutter.EnvErrorsAtStart+"="+strings.Join(ks, ","), fakeflutter.EnvStamp+"=1")
	}
	r := startRun(b, s, root, vars...)
	defer r.Stop(context.Background())
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(b.Context(), apiWS{hc, root}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	<-r.Started()
	timeout := time.After(time.Minute)
	for {
		changed := r.Errors().Changed() // before the count: no error slips between
		if r.Errors().Stats().Total >= n {
			break
		}
		select {
		case <-changed: // the app's errors arriving
		case <-timeout:
			b.Fatalf("the app's %d errors did not arrive", n)
		}
	}
	res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "flutter_errors", Arguments: map[string]any{"run_id": r.ID()}})
	if err != nil || res.IsError {
		b.Fatalf("flutter_errors: %v %v", err, res)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}
