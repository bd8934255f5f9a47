package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkDashboardLog: a run printing 1k lines/s, each stamped with the
// time the child printed it, followed by the dashboard in headless
// Chromium; reports the p50 and p99 from the child's print to the line in
// the page's DOM (the first 500 lines, the backlog, left out).
func BenchmarkDashboardLog(b *testing.B) {
	chromium := ""
	for _, p := range []string{os.Getenv("FLY_CHROMIUM"), "/usr/bin/chromium"} {
		if _, err := os.Stat(p); p != "" && err == nil {
			chromium = p
		}
	}
	dir := conformanceDir(b)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); chromium == "" || err != nil {
		b.Skip("needs Chromium and the npm packages of testdata/conformance (run the tests once)")
	}
	for b.Loop() {
		e := flytest.NewEnv(b)
		e.WithFakeFlutter(b, fakeflutter.EnvLinesPerSec+"=1000", fakeflutter.EnvStamp+"=1")
		addr := "127.0.0.1:0"
		flytest.StartFlyd(b, e, "--listen", addr)
		st, err := getStatus(e)
		if err != nil {
			b.Fatal(err)
		}
		root := b.TempDir()
		writeTree(b, root, map[string]string{"pubspec.yaml": "name: demo\n"})
		cs := viaShim(e)(b, "bench", root, nil)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "flutter_run", Arguments: map[string]any{"device": "linux"}})
		if err != nil || res.IsError {
			b.Fatalf("flutter_run: %v %v", err, res)
		}
		var run mcpserver.RunResult
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &run)
		tok, _ := os.ReadFile(e.Paths.Token())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), filepath.Join(dir, "dashboard.mjs"))
		cmd.Env = append(os.Environ(), "FLY_URL=http://"+st.HTTP+"/#token="+strings.TrimSpace(string(tok)), "FLY_RUN="+run.RunID,
			"CHROMIUM="+chromium, "FLY_BENCH_LINES=5500", "FLY_BENCH_DEBUG="+os.Getenv("FLY_BENCH_DEBUG"))
		var stderr flytest.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			b.Fatalf("browser: %v\n%s\n%s", err, out, stderr.String())
		}
		var r struct {
			P50, P99 float64
			N        int
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, `"bench"`) {
				json.Unmarshal([]byte(line), &r)
			}
		}
		b.ReportMetric(r.P50, "ms-p50")
		b.ReportMetric(r.P99, "ms-p99")
		b.ReportMetric(float64(r.N), "lines")
	}
}
