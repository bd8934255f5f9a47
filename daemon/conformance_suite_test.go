package daemon

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
)

// TestConformanceSuite runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in testdata/conformance)
// against a real flyd's /mcp over TCP. The suite sends no token, so a
// reverse proxy in front adds it and keeps the loopback Host. Scenarios
// that need the suite's own fixtures (its test_* tools, prompts and
// test:// resources, which flyd does not have) are the expected failures
// in conformance-baseline.yml, each saying which fixture; the suite fails
// the run on any other failure and on a baseline entry that passes.
func TestConformanceSuite(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir := conformanceDir(t)
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil || st.HTTP == "" {
		t.Fatalf("no loopback listener: %v %+v", err, st)
	}
	tok, err := os.ReadFile(e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}
	target := &url.URL{Scheme: "http", Host: st.HTTP}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the suite's Host, a loopback name
			r.Out.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		},
		FlushInterval: -1, // SSE streams pass through as they come
	})
	defer proxy.Close()

	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"pubspec.yaml": "name: conformance\n", "lib/main.dart": "void main() {}\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{filepath.Join(dir, "node_modules", ".bin", "conformance"), "server",
		"--url", proxy.URL + "/mcp?workspace=" + url.QueryEscape(ws), "--suite", "active",
		"-o", t.TempDir()}
	if os.Getenv("FLY_CONFORMANCE_NO_BASELINE") == "" {
		args = append(args, "--expected-failures", filepath.Join(dir, "conformance-baseline.yml"))
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("conformance suite:\n%s", out)
	if err != nil {
		t.Fatalf("the conformance suite failed: %v", err)
	}
}
