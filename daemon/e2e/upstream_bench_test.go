package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchUpstream is one upstream the benchmarks share: the go-sdk fake
// (with its analysis child) or server-everything from npm.
type benchUpstream struct {
	name  string
	cmd   []string          // command and arguments
	env   map[string]string // over the environment
	call  string            // a small tool
	args  map[string]any
	child bool // starts an analysis child (the fake)
}

func benchUpstreams(b *testing.B) []benchUpstream {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	// The fake's analysis child holds 64 MiB: the real one holds about
	// 2.8 GB, so this understates what sharing saves.
	ups := []benchUpstream{{name: "gosdk", cmd: []string{exe, "-test.run=^$"}, env: map[string]string{"FLY_TEST_HELPER": "upstream", fakeupstream.EnvChildMB: "64"},
		call: "echo", args: map[string]any{"text": "hi"}, child: true}}
	dir := filepath.Join(conformanceDir(b), "node_modules")
	if _, err := os.Stat(filepath.Join(dir, ".bin", "mcp-server-everything")); err == nil {
		ups = append(ups, benchUpstream{name: "everything",
			cmd:  []string{filepath.Join(dir, ".bin", "node"), filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"},
			call: "echo", args: map[string]any{"message": "hi"}})
	} else {
		b.Log("server-everything is not installed (run the conformance tests once): benchmarking the go-sdk upstream only")
	}
	return ups
}

// startBenchFlyd runs flyd with u as its only upstream, recording the
// fake's processes into dir.
func startBenchFlyd(b *testing.B, u benchUpstream, dir string) *flytest.Env {
	e := flytest.NewEnv(b)
	env := map[string]string{fakeupstream.EnvDir: dir}
	for k, v := range u.env {
		env[k] = v
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{u.name: map[string]any{"command": u.cmd[0], "args": u.cmd[1:], "env": env}}})
	if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.Upstreams(), cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	flytest.StartFlyd(b, e, "--log-level", "warn")
	return e
}

// standalone starts u as its own stdio server for one client, as editors
// do today, and returns the session and the server's pid.
func standalone(b *testing.B, u benchUpstream, dir string) (*mcp.ClientSession, int) {
	cmd := exec.Command(u.cmd[0], u.cmd[1:]...)
	cmd.Env = append(os.Environ(), fakeupstream.EnvDir+"="+dir)
	for k, v := range u.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cs := connectClient(b, "standalone", &mcp.CommandTransport{Command: cmd}, nil)
	return cs, cmd.Process.Pid
}

// shimSession connects through a real flyctl mcp and returns the shim's pid.
func shimSession(b *testing.B, e *flytest.Env, ws string) (*mcp.ClientSession, int) {
	_, flyctl := flytest.Binaries(b)
	cmd := exec.Command(flyctl, "mcp", "--workspace", ws)
	cmd.Env = e.Vars
	cs := connectClient(b, "shim", &mcp.CommandTransport{Command: cmd}, nil)
	return cs, cmd.Process.Pid
}

// pss is the proportional set size of pid in bytes: shared pages (the
// same binary ten times) count once in total.
func pss(b *testing.B, pid int) int64 { return smapsKB(b, pid, "Pss:") << 10 }

func sumPSS(b *testing.B, pids []int) int64 {
	var n int64
	for _, p := range pids {
		n += pss(b, p)
	}
	return n
}

// BenchmarkUpstreamMemory: ten sessions of one workspace using an upstream
// through flyd (flyd + 10 shims + 1 upstream and its children, by PSS)
// against ten standalone upstreams (one per client, as editors run them).
// Reports ratio = shared/standalone (goal ≤ 0.25) and the analysis
// children each way (goal 1 against 10).
func BenchmarkUpstreamMemory(b *testing.B) {
	for _, u := range benchUpstreams(b) {
		b.Run(u.name, func(b *testing.B) {
			ws := b.TempDir()
			writeTree(b, ws, map[string]string{"pubspec.yaml": "name: app\n", "lib/main.dart": "void main() {}\n"})
			for b.Loop() {
				sharedDir, aloneDir := b.TempDir(), b.TempDir()
				e := startBenchFlyd(b, u, sharedDir)
				var pids []int
				ctx := context.Background()
				for range 10 {
					cs, pid := shimSession(b, e, ws)
					pids = append(pids, pid)
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.name + "_" + u.call, Arguments: u.args}); err != nil {
						b.Fatal(err)
					}
				}
				st, err := getStatus(e)
				if err != nil || len(st.Upstreams) != 1 {
					b.Fatalf("status: %v %+v", err, st)
				}
				shims := sumPSS(b, pids)
				flyd := pss(b, st.PID)
				pids = append(pids, st.PID, st.Upstreams[0].PID)
				pids = append(pids, fakeupstream.PIDs(sharedDir, "children")...)
				shared := sumPSS(b, pids)
				b.ReportMetric(float64(flyd)/(1<<20), "MiB-flyd")
				b.ReportMetric(float64(shims)/(1<<20), "MiB-10-shims")

				var alone []int
				for range 10 {
					cs, pid := standalone(b, u, aloneDir)
					alone = append(alone, pid)
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.call, Arguments: u.args}); err != nil {
						b.Fatal(err)
					}
				}
				alone = append(alone, fakeupstream.PIDs(aloneDir, "children")...)
				standaloneBytes := sumPSS(b, alone)
				b.ReportMetric(float64(shared)/(1<<20), "MiB-shared")
				b.ReportMetric(float64(standaloneBytes)/(1<<20), "MiB-standalone")
				b.ReportMetric(float64(shared)/float64(standaloneBytes), "ratio")
				if u.child {
					b.ReportMetric(float64(len(fakeupstream.PIDs(sharedDir, "children"))), "children-shared")
					b.ReportMetric(float64(len(fakeupstream.PIDs(aloneDir, "children"))), "children-standalone")
				}
			}
		})
	}
}

// BenchmarkUpstreamCall: a small upstream tool call through flyctl mcp,
// flyd and the shared upstream, against the same call to a standalone
// stdio upstream, interleaved. Reports p50s and ratio = shared/standalone
// p50 (goal ≤ 1.3), and ratio-direct for the same call over flyd's
// WebSocket without the shim process, which separates flyd's hop from
// the shim's.
func BenchmarkUpstreamCall(b *testing.B) {
	for _, u := range benchUpstreams(b) {
		b.Run(u.name, func(b *testing.B) {
			ws := b.TempDir()
			writeTree(b, ws, map[string]string{"pubspec.yaml": "name: app\n"})
			e := startBenchFlyd(b, u, b.TempDir())
			shared, _ := shimSession(b, e, ws)
			direct := connectClient(b, "direct", directWS{e, ws}, nil)
			alone, _ := standalone(b, u, b.TempDir())
			ctx := context.Background()
			call := func(cs *mcp.ClientSession, name string) time.Duration {
				start := time.Now()
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: u.args}); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for range 50 {
				call(shared, u.name+"_"+u.call)
				call(direct, u.name+"_"+u.call)
				call(alone, u.call)
			}
			var ts, td, ta []time.Duration
			for b.Loop() {
				for range 100 {
					ts = append(ts, call(shared, u.name+"_"+u.call))
					td = append(td, call(direct, u.name+"_"+u.call))
					ta = append(ta, call(alone, u.call))
				}
			}
			ps, pd, pa := p50(ts), p50(td), p50(ta)
			b.ReportMetric(float64(ps.Microseconds()), "µs-p50-shared")
			b.ReportMetric(float64(pd.Microseconds()), "µs-p50-direct")
			b.ReportMetric(float64(pa.Microseconds()), "µs-p50-standalone")
			b.ReportMetric(float64(ps)/float64(pa), "ratio")
			b.ReportMetric(float64(pd)/float64(pa), "ratio-direct")
		})
	}
}

// p50 and p99 are the median and 99th percentile of ds.
func p50(ds []time.Duration) time.Duration { return quantile(ds, 50) }
func p99(ds []time.Duration) time.Duration { return quantile(ds, 99) }

func quantile(ds []time.Duration, pct int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*pct/100]
}

// BenchmarkUpstreamWarmList: tools/list of the tenth session on a
// workspace, answered from the shared upstream's lists, against the first
// session's tools/list on a fresh flyd, which must start the upstream.
// Reports ratio = cold/warm (goal ≥ 20).
func BenchmarkUpstreamWarmList(b *testing.B) {
	for _, u := range benchUpstreams(b) {
		b.Run(u.name, func(b *testing.B) {
			ws := b.TempDir()
			writeTree(b, ws, map[string]string{"pubspec.yaml": "name: app\n"})
			var cold, warm []time.Duration
			ctx := context.Background()
			list := func(cs *mcp.ClientSession) time.Duration {
				start := time.Now()
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == u.name+"_"+u.call }) {
					b.Fatalf("tools/list lacks %s_%s", u.name, u.call)
				}
				return time.Since(start)
			}
			for b.Loop() {
				e := startBenchFlyd(b, u, b.TempDir())
				first := newRawShim(b, e, ws)
				cold = append(cold, first.list(b, u.name+"_"+u.call))
				for range 8 {
					cs, _ := shimSession(b, e, ws)
					list(cs)
				}
				tenth := newRawShim(b, e, ws)
				warm = append(warm, tenth.list(b, u.name+"_"+u.call))
			}
			pc, pw := p50(cold), p50(warm)
			b.ReportMetric(float64(pc.Microseconds()), "µs-cold")
			b.ReportMetric(float64(pw.Microseconds()), "µs-warm")
			b.ReportMetric(float64(pc)/float64(pw), "ratio")
		})
	}
}

// rawShim speaks JSON-RPC lines to a real flyctl mcp, so that a timing
// holds flyd's answer and the hop, not a client library's work on it
// (the go-sdk client compiles every tool's schema on tools/list).
type rawShim struct {
	in    *bufio.Writer
	out   *bufio.Reader
	id    int
	close func() // ends the process: closes its stdin and waits
	pid   int
}

func newRawShim(b *testing.B, e *flytest.Env, ws string) *rawShim {
	_, flyctl := flytest.Binaries(b)
	cmd := exec.Command(flyctl, "mcp", "--workspace", ws)
	cmd.Env = e.Vars
	return newRawClient(b, cmd)
}

// newRawClient starts cmd, a stdio MCP server (or the shim), and
// initializes a session with it in raw JSON-RPC lines.
func newRawClient(b *testing.B, cmd *exec.Cmd) *rawShim {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	end := sync.OnceFunc(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	b.Cleanup(end)
	r := &rawShim{in: bufio.NewWriter(stdin), out: bufio.NewReaderSize(stdout, 1<<20), close: end, pid: cmd.Process.Pid}
	r.roundTrip(b, `"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	r.send(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawShim) send(b *testing.B, line string) {
	if _, err := r.in.WriteString(line + "\n"); err != nil {
		b.Fatal(err)
	}
	if err := r.in.Flush(); err != nil {
		b.Fatal(err)
	}
}

// roundTrip sends a request and returns the line of its reply.
func (r *rawShim) roundTrip(b *testing.B, body string) string {
	r.id++
	id := `"id":` + strconv.Itoa(r.id)
	r.send(b, `{"jsonrpc":"2.0",`+id+`,`+body+`}`)
	for {
		line, err := r.out.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(line, id+",") || strings.Contains(line, id+"}") {
			return line
		}
	}
}

// list times one tools/list and checks it names tool.
func (r *rawShim) list(b *testing.B, tool string) time.Duration {
	start := time.Now()
	line := r.roundTrip(b, `"method":"tools/list"`)
	d := time.Since(start)
	if !strings.Contains(line, `"`+tool+`"`) {
		b.Fatalf("tools/list lacks %s: %.300s", tool, line)
	}
	return d
}

// BenchmarkToolList: what tools/list costs an agent, in bytes of the
// line the shim hands its client: flyd's own tools alone, and with each
// benchmark upstream beside them, unfiltered and with --tools app
// (issue 21's budget for flyd's own: 6 KB).
func BenchmarkToolList(b *testing.B) {
	ws := b.TempDir()
	writeTree(b, ws, map[string]string{"pubspec.yaml": "name: app\n"})
	shim := func(e *flytest.Env, args ...string) *rawShim {
		_, flyctl := flytest.Binaries(b)
		cmd := exec.Command(flyctl, append([]string{"mcp", "--workspace", ws}, args...)...)
		cmd.Env = e.Vars
		return newRawClient(b, cmd)
	}
	list := func(b *testing.B, r *rawShim, tool string) int {
		line := r.roundTrip(b, `"method":"tools/list"`)
		if !strings.Contains(line, `"`+tool+`"`) {
			b.Fatalf("tools/list lacks %s: %.300s", tool, line)
		}
		return len(line)
	}
	b.Run("own", func(b *testing.B) {
		e := flytest.NewEnv(b)
		flytest.StartFlyd(b, e, "--log-level", "warn")
		r := shim(e)
		var n int
		for b.Loop() {
			n = list(b, r, "flutter_run")
		}
		b.ReportMetric(float64(n), "bytes")
	})
	for _, u := range benchUpstreams(b) {
		b.Run("with-"+u.name, func(b *testing.B) {
			e := startBenchFlyd(b, u, b.TempDir())
			all, app := shim(e), shim(e, "--tools", "app,"+u.name)
			var n, na int
			for b.Loop() {
				n, na = list(b, all, u.name+"_"+u.call), list(b, app, u.name+"_"+u.call)
			}
			b.ReportMetric(float64(n), "bytes")
			b.ReportMetric(float64(na), "bytes-app")
		})
	}
}
