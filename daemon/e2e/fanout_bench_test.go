package e2e

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	s, hc, root, _ := benchFlyd(b, daemon.Config{})
	var all []time.Duration
	for b.Loop() {
		r := startRun(b, s, root, fakeflutter.EnvTickMS+"=100", fakeflutter.EnvLines+"="+strconv.Itoa(lines),
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
			cs, err := c.Connect(b.Context(), apiWS{hc, root}, nil)
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

// benchFlyd is an in-process flyd of cfg whose flutter is the fake, a
// client for its socket, and a small project to serve; it returns the
// fake's path too, for a benchmark that runs it as an IDE would.
func benchFlyd(b *testing.B, cfg daemon.Config) (s *daemon.Server, hc *http.Client, root, flutter string) {
	b.Helper()
	flutter, err := fakeflutter.Install(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cfg.Flutter = flutter
	s, sock, _ := runInProcess(b, cfg)
	hc = unixHTTPClient(sock)
	b.Cleanup(hc.CloseIdleConnections)
	if root, err = filepath.EvalSymlinks(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	writeTree(b, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	return s, hc, root, flutter
}

// apiWS connects an MCP client to flyd's WebSocket endpoint over the
// socket client hc, on workspace root.
type apiWS struct {
	hc   *http.Client
	root string
}

func (w apiWS) Connect(ctx context.Context) (mcp.Connection, error) {
	c, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient: w.hc, Subprotocols: []string{wire.Subprotocol},
		HTTPHeader: http.Header{wire.HeaderWorkspace: {url.QueryEscape(w.root)}, wire.HeaderVersion: {wire.VersionHeader()}},
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return mcpconn.NewWebSocket(c, "subscriber", 5*time.Second), nil
}

// startRun starts `flutter run --machine` (the fake) in root, steered by
// vars ("FAKE_FLUTTER_X=v"), without waiting for the app: the sessions
// subscribe while it starts.
func startRun(b *testing.B, s *daemon.Server, root string, vars ...string) *runs.Run {
	b.Helper()
	env := map[string]string{"FLY_TEST_HELPER": "flutter"}
	for _, v := range append(os.Environ(), vars...) {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	r, err := s.Runs().Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: root, Env: env, Args: []string{"run", "--machine"}})
	if err != nil {
		b.Fatal(err)
	}
	return r
}
