package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// suiteRun is one run of the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in testdata/conformance):
// which release (its package under node_modules), what it runs, and the
// baseline of expected failures, each saying why.
type suiteRun struct {
	pkg      string   // "conformance" (0.1.16) or "conformance-next" (the 0.2.0 line)
	args     []string // what to run: --suite or --requirements
	baseline string   // file in testdata/conformance
}

// TestConformanceSuite runs the suite against a real flyd's /mcp over
// TCP, in both eras: 0.1.16's active suite, and the 0.2.0 line's
// requirement sets of 2025-11-25 and 2026-07-28. The suite sends no
// token, so a reverse proxy in front adds it and keeps the loopback Host.
// Scenarios that need the suite's own fixtures (its test_* tools, prompts
// and test:// resources, which flyd does not have) are the expected
// failures in the baselines, each saying which fixture; the suite fails
// the run on any other failure and on a baseline entry that passes.
// TestConformanceFixtures runs those through flyd's proxy.
func TestConformanceSuite(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir := conformanceDir(t)
	e := flytest.NewEnv(t)
	why := startSuiteFlyd(t, e)
	url := suiteURL(t, e, t.TempDir())
	for name, r := range map[string]suiteRun{
		"0.1.16":           {"conformance", []string{"--suite", "active"}, "conformance-baseline.yml"},
		"0.2.0/2025-11-25": {"conformance-next", []string{"--requirements", "2025-11-25"}, "conformance-baseline-2025-11-25.yml"},
		"0.2.0/2026-07-28": {"conformance-next", []string{"--requirements", "2026-07-28"}, "conformance-baseline-2026-07-28.yml"},
	} {
		t.Run(name, func(t *testing.T) { runSuite(t, dir, url, r, why) })
	}
}

// suiteFailures keeps why the suite's runs under one flyd failed.
type suiteFailures struct {
	mu    sync.Mutex
	lines []string
}

func (w *suiteFailures) add(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}

// startSuiteFlyd starts e's flyd for the suite. If t fails, its log ends
// with the stacks of flyd's goroutines (where flyd is stuck, if it is,
// while the suite waited) and then, once more, why the suite failed: a
// CI log shows its tail, which the stacks would otherwise fill.
func startSuiteFlyd(t *testing.T, e *flytest.Env) *suiteFailures {
	why := &suiteFailures{}
	t.Cleanup(func() { // runs last: after flyd's log is shown
		if t.Failed() {
			why.mu.Lock()
			defer why.mu.Unlock()
			t.Logf("the conformance suite failed (flyd's stacks above):\n%s", strings.Join(why.lines, "\n"))
		}
	})
	f := flytest.StartFlyd(t, e)
	t.Cleanup(func() {
		if t.Failed() {
			f.Dump(t)
		}
	})
	return why
}

// suiteURL serves e's flyd /mcp to the suite: through a reverse proxy
// that adds the token, on the workspace ws.
func suiteURL(t *testing.T, e *flytest.Env, ws string) string {
	t.Helper()
	st, err := getStatus(e)
	if err != nil || st.HTTP == "" {
		t.Fatalf("no loopback listener: %v %+v", err, st)
	}
	tok, err := os.ReadFile(e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}
	target := &url.URL{Scheme: "http", Host: st.HTTP}
	proxy := httptest.NewServer(suiteProxy(target, strings.TrimSpace(string(tok)), nil))
	t.Cleanup(proxy.Close)
	writeTree(t, ws, map[string]string{"pubspec.yaml": "name: conformance\n", "lib/main.dart": "void main() {}\n"})
	return proxy.URL + "/mcp?workspace=" + url.QueryEscape(ws)
}

// runSuite runs the suite's server checks against url. With
// FLY_CONFORMANCE_NO_BASELINE set, every failure shows;
// FLY_CONFORMANCE_ARGS replaces what to run (say "--scenario caching
// --verbose"); FLY_CONFORMANCE_OUT keeps the suite's results there.
func runSuite(t *testing.T, dir, url string, r suiteRun, why *suiteFailures) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	what := r.args
	if a := os.Getenv("FLY_CONFORMANCE_ARGS"); a != "" {
		what = strings.Fields(a)
	}
	out := t.TempDir()
	if d := os.Getenv("FLY_CONFORMANCE_OUT"); d != "" { // keep the suite's results
		out = filepath.Join(d, strings.NewReplacer("/", "_").Replace(t.Name()))
	}
	args := append([]string{filepath.Join(dir, "node_modules", "@modelcontextprotocol", r.pkg, "dist", "index.js"), "server",
		"--url", url, "-o", out}, what...)
	if os.Getenv("FLY_CONFORMANCE_NO_BASELINE") == "" {
		args = append(args, "--expected-failures", filepath.Join(dir, r.baseline))
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	log, err := cmd.CombinedOutput()
	t.Logf("conformance suite %s %v:\n%s", r.pkg, r.args, log)
	if err != nil {
		why.add("%s: the suite exited with %v; its summary:\n%s", t.Name(), err, summary(log))
		logFailedChecks(t, out, why)
		t.Fatalf("the conformance suite failed: %v", err)
	}
}

// summary is the tail of the suite's output, where it lists what failed.
func summary(log []byte) string {
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// logFailedChecks logs why each failed check of the suite's results in
// out failed: the suite prints only which scenarios failed, and its
// results go with the test's temporary directory.
func logFailedChecks(t *testing.T, out string, why *suiteFailures) {
	_ = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "checks.json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		_ = json.Unmarshal(b, &checks)
		for _, c := range checks {
			if c.Status == "FAILURE" {
				t.Logf("%s: %s: %s", filepath.Base(filepath.Dir(path)), c.ID, c.ErrorMessage)
				why.add("  %s: %s: %s", filepath.Base(filepath.Dir(path)), c.ID, c.ErrorMessage)
			}
		}
		return nil
	})
}

// TestConformanceFixtures runs the scenarios that call the suite's own
// fixtures (test_* tools, prompts, test:// resources) through flyd's
// proxy: the go-sdk's conformance everything-server, built from the
// module cache at the go-sdk version in go.mod, is a test upstream whose
// names go unprefixed ("prefix": ""), as the suite calls them by name.
// Both requirement sets of the 0.2.0 line run against the fixture as flyd
// speaks to it by default (2026-07-28, which it offers) and pinned to the
// handshake era ("protocol": "2025-11-25"), so that the suite, a client
// of either era, meets an upstream of either era: four runs, each with
// its baseline.
func TestConformanceFixtures(t *testing.T) {
	t.Parallel() // its own flyds: they wait mostly, so they overlap the others
	dir := conformanceDir(t)
	fixture := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", fixture, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the go-sdk's everything-server: %v\n%s", err, out)
	}
	for _, up := range []struct {
		name     string // of the subtest: the era flyd speaks to the fixture in
		protocol string // its "protocol" in upstreams.json
		baseline string // the baselines' prefix
	}{
		{"upstream-2026-07-28", "", "conformance-fixtures-"},
		{"upstream-2025-11-25", "2025-11-25", "conformance-fixtures-legacy-upstream-"},
	} {
		t.Run(up.name, func(t *testing.T) {
			e := flytest.NewEnv(t)
			entry := map[string]any{"command": fixture, "prefix": ""}
			if up.protocol != "" {
				entry["protocol"] = up.protocol
			}
			cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fixture": entry}})
			if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(e.Paths.Upstreams(), cfg, 0o600); err != nil {
				t.Fatal(err)
			}
			why := startSuiteFlyd(t, e)
			for _, client := range []string{"2025-11-25", "2026-07-28"} {
				r := suiteRun{"conformance-next", []string{"--requirements", client}, up.baseline + client + ".yml"}
				t.Run("client-"+client, func(t *testing.T) {
					// A workspace each, so a fixture process each: what one
					// run leaves in flight cannot touch the other's.
					ws := t.TempDir()
					url := suiteURL(t, e, ws)
					// The suite's first scenario should not race the
					// fixture's start: wait until flyd lists its tools.
					cs := viaShim(e)(t, "warm-up", ws, nil)
					flytest.Eventually(t, "the fixture's tools listed", func() bool {
						res, err := cs.ListTools(context.Background(), nil)
						return err == nil && slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "test_simple_text" })
					})
					var st *wire.Status
					flytest.Eventually(t, "the fixtures running", func() bool {
						st, _ = getStatus(e)
						return st != nil && len(st.Upstreams) > 0 && !slices.ContainsFunc(st.Upstreams, func(u wire.Upstream) bool { return u.State != "running" })
					})
					want := up.protocol
					if want == "" {
						want = "2026-07-28"
					}
					for _, u := range st.Upstreams {
						if u.Protocol != want {
							t.Fatalf("the fixture is spoken to at %q, want %s", u.Protocol, want)
						}
					}
					runSuite(t, dir, url, r, why)
				})
			}
		})
	}
}
