package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runStdioServer is the baseline the benchmarks compare flyd against: a
// standalone stdio MCP server, one per client, as editors run today. It is
// flyd's own server code on the go-sdk StdioTransport, indexing
// FLY_TEST_ROOT from scratch at start.
func runStdioServer() int {
	s := New(Config{})
	defer s.ws.close()
	ws, err := s.ws.acquire(os.Getenv("FLY_TEST_ROOT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.serveSession(context.Background(), &mcp.StdioTransport{}, &session{id: newID(), ws: ws, via: "stdio"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// stdioBaseline connects a client to a freshly spawned runStdioServer.
func stdioBaseline(b testing.TB, root string) *mcp.ClientSession {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FLY_TEST_HELPER=stdio-server", "FLY_TEST_ROOT="+root)
	return connectClient(b, "baseline", &mcp.CommandTransport{Command: cmd}, nil)
}

// directWS connects a client straight to flyd's WebSocket endpoint, as a
// browser or remote tool would: no shim process in between.
type directWS struct {
	e    *flytest.Env
	root string
}

func (d directWS) Connect(ctx context.Context) (mcp.Connection, error) {
	hc := d.e.HTTPClient()
	hc.Timeout = 0
	c, _, err := websocket.Dial(ctx, "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient: hc, Subprotocols: []string{wire.Subprotocol},
		HTTPHeader: http.Header{wire.HeaderWorkspace: {url.QueryEscape(d.root)}, wire.HeaderVersion: {wire.VersionHeader()}},
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return newWSConn(c, "direct", 5*time.Second), nil
}

// BenchmarkShimHop: one small resources/read through flyctl mcp and flyd,
// and straight over flyd's WebSocket, against the same read from a spawned
// stdio server, interleaved so all see the same machine load. Reports
// ratio = shim/baseline (goal ≤ 1.2) and ratio-direct = WebSocket/baseline,
// which separates flyd's own cost from the shim process's, and
// ratio-http-vs-shim: the same read over MCP Streamable HTTP on the
// loopback listener against the shim.
func BenchmarkShimHop(b *testing.B) {
	root := b.TempDir()
	writeTree(b, root, map[string]string{"lib/main.dart": "void main() => runApp(const MyApp());\n"})
	e := flytest.NewEnv(b)
	flytest.StartFlyd(b, e, "--log-level", "info")
	shim := viaShim(e)(b, "bench", root, nil)
	direct := connectClient(b, "direct", directWS{e, root}, nil)
	base := stdioBaseline(b, root)
	st, err := getStatus(e)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := os.ReadFile(e.Paths.Token())
	if err != nil {
		b.Fatal(err)
	}
	httpc := viaStreamable(&tcpFlyd{e: e, addr: st.HTTP, token: strings.TrimSpace(string(tok))})(b, "http", root, nil)
	ctx := context.Background()
	params := &mcp.ReadResourceParams{URI: "workspace:///lib/main.dart"}
	read := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		if _, err := cs.ReadResource(ctx, params); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 50 { // warm all four
		read(shim)
		read(direct)
		read(base)
		read(httpc)
	}
	var tShim, tDirect, tBase, tHTTP time.Duration
	b.ResetTimer()
	for b.Loop() {
		tShim += read(shim)
		tDirect += read(direct)
		tBase += read(base)
		tHTTP += read(httpc)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tShim.Microseconds())/n, "µs/shim-read")
	b.ReportMetric(float64(tDirect.Microseconds())/n, "µs/ws-read")
	b.ReportMetric(float64(tBase.Microseconds())/n, "µs/stdio-read")
	b.ReportMetric(float64(tShim)/float64(tBase), "ratio")
	b.ReportMetric(float64(tDirect)/float64(tBase), "ratio-direct")
	b.ReportMetric(float64(tHTTP.Microseconds())/n, "µs/http-read")
	b.ReportMetric(float64(tHTTP)/float64(tShim), "ratio-http-vs-shim")
}

var bigTree struct {
	once  sync.Once
	root  string
	files int
	err   error
}

// benchFiles is the size of the generated workspace: 100k, or
// FLY_BENCH_FILES for a quicker run.
func benchFiles() int {
	if n, err := strconv.Atoi(os.Getenv("FLY_BENCH_FILES")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// largeWorkspace generates (once per test binary) a Flutter-shaped tree.
func largeWorkspace(b testing.TB) string {
	bigTree.once.Do(func() {
		bigTree.files = benchFiles()
		bigTree.root, bigTree.err = os.MkdirTemp("", "flybig")
		if bigTree.err != nil {
			return
		}
		bigTree.err = os.WriteFile(filepath.Join(bigTree.root, "pubspec.yaml"), []byte("name: big\n"), 0o644)
		for i := 0; i < bigTree.files && bigTree.err == nil; i++ {
			dir := filepath.Join(bigTree.root, "lib", fmt.Sprintf("f%03d", i/1000), fmt.Sprintf("d%02d", (i/40)%25))
			if i%40 == 0 {
				bigTree.err = os.MkdirAll(dir, 0o755)
			}
			if bigTree.err == nil {
				src := fmt.Sprintf("// w%06d\nimport 'package:flutter/widgets.dart';\n\nclass W%06d extends StatelessWidget {\n  const W%06d({super.key});\n}\n", i, i, i)
				bigTree.err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("w%06d.dart", i)), []byte(src), 0o644)
			}
		}
	})
	if bigTree.err != nil {
		b.Fatal(bigTree.err)
	}
	return bigTree.root
}

// BenchmarkWarmFirstPage: a new shim on an already indexed large workspace,
// from spawn to its first resources/list page, against a fresh standalone
// stdio server that has to index the tree first (what one server per
// editor window costs today).
func BenchmarkWarmFirstPage(b *testing.B) {
	root := largeWorkspace(b)
	e := flytest.NewEnv(b)
	flytest.StartFlyd(b, e, "--log-level", "info")
	connect := viaShim(e)
	connect(b, "keeps-it-warm", root, nil)
	ctx := context.Background()
	firstPage := func(cs *mcp.ClientSession) {
		res, err := cs.ListResources(ctx, nil)
		if err != nil || len(res.Resources) == 0 {
			b.Fatalf("first page: %v", err)
		}
		cs.Close()
	}
	var tWarm, tFresh time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		firstPage(connect(b, "warm", root, nil))
		tWarm += time.Since(start)
		start = time.Now()
		firstPage(stdioBaseline(b, root))
		tFresh += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tWarm.Microseconds())/n/1000, "ms/warm-shim")
	b.ReportMetric(float64(tFresh.Microseconds())/n/1000, "ms/fresh-server")
	b.ReportMetric(float64(tWarm)/float64(tFresh), "ratio")
}
