package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The CLI tests run flyctl in-process (run) against the real flyd binary,
// whose flutter is this test binary acting as internal/fakeflutter.

func TestMain(m *testing.M) {
	switch os.Getenv("FLY_TEST_HELPER") {
	case "flutter":
		os.Exit(fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	case "upstream":
		os.Exit(fakeupstream.Main(os.Getenv))
	case "upstream-child":
		os.Exit(fakeupstream.Child())
	}
	if wd, err := os.Getwd(); err == nil {
		testdata = filepath.Join(wd, "testdata") // tests may t.Chdir
	}
	code := m.Run()
	flytest.Cleanup()
	os.Exit(code)
}

// flutterProject makes a minimal Flutter project; its path has symlinks
// resolved, as flyd keys workspaces.
func flutterProject(t testing.TB) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	} {
		full := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// mcpSession connects a go-sdk client to flyd through the built
// "flyctl mcp", bound to root. It returns the shim's pid too.
func mcpSession(t testing.TB, e *flytest.Env, root string) (*mcp.ClientSession, int) {
	t.Helper()
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", root)
	cmd.Env = e.Vars
	shimLog := &flytest.Buffer{}
	cmd.Stderr = shimLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("flyctl mcp's stderr:\n%s", shimLog)
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "flyctl-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through flyctl mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd.Process.Pid
}

// callTool calls a tool and decodes its structured result into out.
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		t.Fatalf("%s failed: %s", name, b.String())
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
}

// startRun starts the fake app through flutter_run and returns its run id.
func startRun(t testing.TB, cs *mcp.ClientSession) string {
	t.Helper()
	var out struct {
		RunID string `json:"run_id"`
		State string `json:"state"`
	}
	callTool(t, cs, "flutter_run", map[string]any{"device": "linux"}, &out)
	if out.RunID == "" || out.State != "running" {
		t.Fatalf("flutter_run = %+v, want a running app", out)
	}
	return out.RunID
}

// flyctl runs flyctl in-process and returns its stdout, stderr and exit
// code (as main maps the error).
func flyctl(t testing.TB, getenv func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, args, getenv, strings.NewReader(""), &out, &errb)
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// mustFlyctl is flyctl that fails the test unless it exits 0.
func mustFlyctl(t testing.TB, getenv func(string) string, args ...string) string {
	t.Helper()
	out, errs, code := flyctl(t, getenv, args...)
	if code != 0 {
		t.Fatalf("flyctl %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// jsonLines decodes NDJSON output.
func jsonLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// waitLog polls the run's log until cond holds for its entries (all of
// them, as -o json prints them), and returns them.
func waitLog(t testing.TB, getenv func(string) string, runID, what string, cond func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		lines := jsonLines(t, mustFlyctl(t, getenv, "logs", "tail", runID, "-n", "all", "-o", "json"))
		if cond(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log of run %s never had %s; it has %d lines", runID, what, len(lines))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countTicks(lines []map[string]any) int {
	n := 0
	for _, l := range lines {
		if l["type"] == "entry" && strings.Contains(fmt.Sprint(l["text"]), "tick") {
			n++
		}
	}
	return n
}

// update makes checkGolden rewrite the golden files instead of comparing.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testdata is the package's testdata directory, made absolute in TestMain
// because tests may t.Chdir.
var testdata = "testdata"

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join(testdata, name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}

// normalizer replaces what differs between test runs (ids, paths, pids,
// times, sizes) with placeholders, so outputs compare with goldens.
type normalizer struct {
	literal []string // old, new pairs, applied in order
}

func (n *normalizer) add(old, placeholder string) {
	if old != "" {
		n.literal = append(n.literal, old, placeholder)
	}
}

var (
	reTime     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	reUptime   = regexp.MustCompile(`up \d+(h\d+m)?(m)?\d*s`)
	reSize     = regexp.MustCompile(`\d+(\.\d)? (B|KiB|MiB|GiB)`)
	reSession  = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
	reColumns  = regexp.MustCompile(`  +`)
	reTrailing = regexp.MustCompile(`(?m) +$`)
)

func (n *normalizer) apply(s string) string {
	s = strings.NewReplacer(n.literal...).Replace(s)
	s = reTime.ReplaceAllString(s, "<TIME>")
	s = reUptime.ReplaceAllString(s, "up <UPTIME>")
	s = reSize.ReplaceAllString(s, "<SIZE>")
	s = reSession.ReplaceAllString(s, "<SESSION>")
	s = strings.ReplaceAll(s, wire.Version, "<VERSION>")
	// Tables are aligned to the real lengths: keep the columns, not the
	// padding.
	s = reColumns.ReplaceAllString(s, "  ")
	return reTrailing.ReplaceAllString(s, "")
}

// endpointOf is the endpoint that FLY_SOCKET=path names, as flyd,
// flyctl and the shim resolve it: the socket path itself, or on Windows
// a pipe of its own.
func endpointOf(t testing.TB, path string) string {
	t.Helper()
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: path, paths.EnvStateDir: filepath.Dir(path)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.Socket
}

// endpointProxy forwards connections from its own endpoint to flyd's,
// and can cut them all: a dropped connection without a daemon restart.
type endpointProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newEndpointProxy listens on the endpoint name and forwards to target
// until Cleanup.
func newEndpointProxy(t testing.TB, name, target string) *endpointProxy {
	t.Helper()
	ln, err := ipc.Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &endpointProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve() // owned by p: waited for in Cleanup
	t.Cleanup(func() {
		ln.Close()
		p.drop()
		p.wg.Wait()
	})
	return p
}

func (p *endpointProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := ipc.Dial(context.Background(), p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c) // owned by p: ends when either side closes
		go p.pipe(c, up) // owned by p: likewise
	}
}

func (p *endpointProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// drop cuts every connection the proxy carries.
func (p *endpointProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
