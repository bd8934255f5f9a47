package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/mcpconn"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runStdioServer is the baseline the benchmarks compare flyd against: a
// standalone stdio MCP server, one per client, as editors run today. It is
// flyd's own server code on the go-sdk StdioTransport, indexing
// FLY_TEST_ROOT from scratch at start.
func runStdioServer() int {
	s := daemon.New(daemon.Config{})
	defer s.Close()
	if err := s.ServeTransport(context.Background(), &mcp.StdioTransport{}, os.Getenv("FLY_TEST_ROOT")); err != nil {
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

// runBareRelay is the floor BenchmarkShimHop measures the shim against:
// a process that relays stdin lines to flyd's WebSocket and frames back to
// stdout, and does nothing else (no checks, no tracking, no reconnect).
// Its cost over a direct connection is the extra process itself.
func runBareRelay() int {
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", os.Getenv("FLY_SOCKET"))
	}}}
	c, _, err := websocket.Dial(context.Background(), "ws://flyd"+wire.RouteMCP, &websocket.DialOptions{
		HTTPClient: hc, Subprotocols: []string{wire.Subprotocol},
		HTTPHeader: http.Header{wire.HeaderWorkspace: {url.QueryEscape(os.Getenv("FLY_TEST_ROOT"))}, wire.HeaderVersion: {wire.VersionHeader()}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.SetReadLimit(-1)
	go func() { // ends with the process
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				os.Exit(0)
			}
			os.Stdout.Write(append(b, '\n'))
		}
	}()
	br := bufio.NewReaderSize(os.Stdin, 64<<10)
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return 0
		}
		if err := c.Write(context.Background(), websocket.MessageText, bytes.TrimSpace(l)); err != nil {
			return 1
		}
	}
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
	return mcpconn.NewWebSocket(c, "direct", 5*time.Second), nil
}

// BenchmarkShimHop: one small resources/read through flyctl mcp and flyd,
// and straight over flyd's WebSocket, against the same read from a spawned
// stdio server, interleaved so all see the same machine load. Reports the
// p50 and p99 of each and their ratios: ratio-p50 and ratio-p99 =
// shim/baseline (goal: p50 ≤ 1.2), ratio-direct-p50 = WebSocket/baseline,
// which separates flyd's own cost from the shim process's, and
// ratio-http-vs-shim-p50: the same read over MCP Streamable HTTP on the
// loopback listener against the shim. ratio-bare-relay-p50 is the floor
// of any relay process: runBareRelay in place of the shim.
func BenchmarkShimHop(b *testing.B) {
	const hopSamples = 300 // per iteration: -benchtime 1x gives percentiles
	root := b.TempDir()
	writeTree(b, root, map[string]string{"lib/main.dart": "void main() => runApp(const MyApp());\n"})
	e := flytest.NewEnv(b)
	flytest.StartFlyd(b, e, "--log-level", "info")
	shim := viaShim(e)(b, "bench", root, nil)
	direct := connectClient(b, "direct", directWS{e, root}, nil)
	base := stdioBaseline(b, root)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	relay := exec.Command(self)
	relay.Env = append(slices.Clone(e.Vars), "FLY_TEST_HELPER=bare-relay", "FLY_TEST_ROOT="+root)
	bare := connectClient(b, "bare", &mcp.CommandTransport{Command: relay}, nil)
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
	for range 50 { // warm all five
		read(shim)
		read(direct)
		read(base)
		read(httpc)
		read(bare)
	}
	var tShim, tDirect, tBase, tHTTP, tBare []time.Duration
	for b.Loop() {
		for range hopSamples {
			tShim = append(tShim, read(shim))
			tDirect = append(tDirect, read(direct))
			tBase = append(tBase, read(base))
			tHTTP = append(tHTTP, read(httpc))
			tBare = append(tBare, read(bare))
		}
	}
	reportLatency(b, "shim", tShim)
	reportLatency(b, "ws", tDirect)
	reportLatency(b, "stdio", tBase)
	reportLatency(b, "http", tHTTP)
	reportLatency(b, "bare", tBare)
	b.ReportMetric(ratio(p50(tShim), p50(tBase)), "ratio-p50")
	b.ReportMetric(ratio(p99(tShim), p99(tBase)), "ratio-p99")
	b.ReportMetric(ratio(p50(tDirect), p50(tBase)), "ratio-direct-p50")
	b.ReportMetric(ratio(p50(tBare), p50(tBase)), "ratio-bare-relay-p50")
	b.ReportMetric(ratio(p50(tHTTP), p50(tShim)), "ratio-http-vs-shim-p50")
}

// reportLatency reports the p50 and p99 of ds in µs under name.
func reportLatency(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(float64(p50(ds).Nanoseconds())/1e3, "µs-p50-"+name)
	b.ReportMetric(float64(p99(ds).Nanoseconds())/1e3, "µs-p99-"+name)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

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

// BenchmarkFirstAnswer: what an editor window waits for on a warm
// 100k-file project, from spawning its MCP server to the first listing:
// a new flyctl mcp on a flyd that has the tree indexed (resources/list),
// against @modelcontextprotocol/server-filesystem spawned from npm on the
// same tree (list_directory of the root), which is what a client without
// flyd runs. Each is timed with a raw JSON-RPC client that adds no cost of
// its own (ratio = server-filesystem/fly, goal ≥ 100), and with the
// official TypeScript SDK client (ratio-ts), most of whose time is its
// own. Skipped with a note when server-filesystem is not installed.
func BenchmarkFirstAnswer(b *testing.B) {
	root := largeWorkspace(b)
	e := flytest.NewEnv(b)
	flytest.StartFlyd(b, e, "--log-level", "info")
	_, flyctl := flytest.Binaries(b)
	flyCmd := func() *exec.Cmd {
		cmd := exec.Command(flyctl, "mcp", "--workspace", root)
		cmd.Env = e.Vars
		return cmd
	}
	newRawShim(b, e, root).close() // the first session indexes the tree
	keep := newRawShim(b, e, root) // and this one keeps it warm
	defer keep.close()
	fsCmd := func() *exec.Cmd { return serverFilesystem(b, root) }
	if fsCmd() == nil {
		b.Skip("server-filesystem is not installed (run the conformance tests once, or npm ci in testdata/conformance)")
	}
	first := func(cmd *exec.Cmd, list string, check string) time.Duration {
		start := time.Now()
		r := newRawClient(b, cmd)
		line := r.roundTrip(b, list)
		d := time.Since(start)
		r.close()
		if !strings.Contains(line, check) {
			b.Fatalf("first listing: %.300s", line)
		}
		return d
	}
	fsList := `"method":"tools/call","params":{"name":"list_directory","arguments":{"path":` + strconv.Quote(root) + `}}`
	var tFly, tFS []time.Duration
	for b.Loop() {
		for range 5 {
			tFly = append(tFly, first(flyCmd(), `"method":"resources/list"`, `"workspace:///`))
			tFS = append(tFS, first(fsCmd(), fsList, `[DIR] lib`))
		}
	}
	b.ReportMetric(float64(p50(tFly).Microseconds())/1000, "ms-fly")
	b.ReportMetric(float64(p50(tFS).Microseconds())/1000, "ms-server-filesystem")
	b.ReportMetric(ratio(p50(tFS), p50(tFly)), "ratio")

	// The same with the TypeScript SDK client.
	node := filepath.Join(flytest.ConformanceDir(b), "node_modules", ".bin", "node")
	ts := func(cmd *exec.Cmd, list string) time.Duration {
		args, _ := json.Marshal(cmd.Args[1:])
		c := exec.Command(node, "firstanswer.mjs")
		c.Dir = flytest.ConformanceDir(b)
		c.Env = append(slices.Clone(e.Vars), "FLY_FA_COMMAND="+cmd.Path, "FLY_FA_ARGS="+string(args), "FLY_FA_LIST="+list, "FLY_FA_RUNS=5")
		var stderr bytes.Buffer // the servers' banners; shown on failure
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			b.Fatalf("firstanswer.mjs: %v\n%s", err, stderr.Bytes())
		}
		var ds []time.Duration
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var r struct{ MS float64 }
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				b.Fatalf("firstanswer.mjs printed %q", l)
			}
			ds = append(ds, time.Duration(r.MS*float64(time.Millisecond)))
		}
		return p50(ds)
	}
	flyTS, fsTS := ts(flyCmd(), "resources"), ts(fsCmd(), root)
	b.ReportMetric(float64(flyTS.Microseconds())/1000, "ms-fly-ts")
	b.ReportMetric(float64(fsTS.Microseconds())/1000, "ms-server-filesystem-ts")
	b.ReportMetric(ratio(fsTS, flyTS), "ratio-ts")
}
