package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkSearch measures files_find and files_grep through the shim on
// the large generated workspace, against what a client without flyd uses:
// @modelcontextprotocol/server-filesystem's search_files (from npm, in
// testdata/conformance; skipped with a note when it is not installed) and
// a cold rg process with a warm page cache (skipped when rg is absent).
// Each side's answer is checked to hold the same number of matches.
// Reports ms of each and ratios baseline/fly (goal: find ≥ 1000, grep > 1).
func BenchmarkSearch(b *testing.B) {
	root := largeWorkspace(b)
	e := flytest.NewEnv(b)
	d := flytest.StartFlyd(b, e, "--log-level", "info")
	cs := viaShim(e)(b, "searcher", root, nil)
	ctx := context.Background()
	call := func(name string, args map[string]any, out any) time.Duration {
		start := time.Now()
		res := callTool(b, cs, name, args, out)
		if res.IsError {
			b.Fatalf("%s: %s", name, toolText(res))
		}
		return time.Since(start)
	}
	var f mcpserver.FindResult
	call("files_find", map[string]any{"glob": "**/*.dart"}, &f) // warm
	rssBefore := rssKB(d.Cmd.Process.Pid)

	b.Run("find", func(b *testing.B) {
		var fly time.Duration
		for b.Loop() {
			fly += call("files_find", map[string]any{"glob": "**/*.dart"}, &f)
		}
		flyMS := float64(fly.Microseconds()) / float64(b.N) / 1000
		b.ReportMetric(flyMS, "ms/fly")
		b.ReportMetric(float64(f.Total), "files")
		cmd := serverFilesystem(b, root)
		if cmd == nil {
			b.Log("server-filesystem is not installed (run the conformance tests once, or npm ci in testdata/conformance): no baseline")
			return
		}
		fs := connectClient(b, "baseline", &mcp.CommandTransport{Command: cmd}, nil)
		start := time.Now()
		res, err := fs.CallTool(ctx, &mcp.CallToolParams{Name: "search_files", Arguments: map[string]any{"path": root, "pattern": "**/*.dart"}})
		base := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("search_files: %v %s", err, toolText(res))
		}
		if n := strings.Count(toolText(res), ".dart"); n != f.Total {
			b.Errorf("search_files found %d files, files_find %d", n, f.Total)
		}
		b.ReportMetric(float64(base.Microseconds())/1000, "ms/server-filesystem")
		b.ReportMetric(float64(base.Microseconds())/1000/flyMS, "ratio")
	})

	for _, tc := range flytest.GrepCases {
		b.Run("grep-"+tc.Name, func(b *testing.B) {
			grepOnce := func() (time.Duration, int) {
				var took time.Duration
				n := 0
				cursor := ""
				for {
					var g mcpserver.GrepResult
					args := map[string]any{"pattern": tc.Pattern, "literal": tc.Literal, "limit": 1000}
					if cursor != "" {
						args["cursor"] = cursor
					}
					took += call("files_grep", args, &g)
					n += g.Matches
					if !g.Truncated {
						return took, n
					}
					cursor = g.NextCursor
				}
			}
			// The first search may read the disk (BenchmarkFirstSearch
			// measures it); flyd is a warm daemon, so the timed ones are
			// warm.
			first, _ := grepOnce()
			b.Logf("%s: the first search took %v", tc.Name, first)
			var fly time.Duration
			matches := 0
			for b.Loop() {
				took, n := grepOnce()
				fly += took
				matches = n
			}
			flyMS := float64(fly.Microseconds()) / float64(b.N) / 1000
			b.ReportMetric(flyMS, "ms/fly")
			b.ReportMetric(float64(matches), "matches")
			rg, err := exec.LookPath("rg")
			if err != nil {
				b.Log("rg is not installed (apt-get install ripgrep): no baseline")
				return
			}
			var base time.Duration
			for range 3 {
				took, n := flytest.RunRipgrep(b, rg, root, tc)
				base += took
				if n != matches {
					b.Errorf("rg found %d matching lines, files_grep %d", n, matches)
				}
			}
			baseMS := float64(base.Microseconds()) / 3 / 1000
			b.ReportMetric(baseMS, "ms/rg")
			b.ReportMetric(baseMS/flyMS, "ratio")
		})
	}
	b.Logf("flyd RSS: %d KiB before the searches, %d KiB after (the content cache and buffers)", rssBefore, rssKB(d.Cmd.Process.Pid))
}

// rssKB is the resident set of pid in KiB, from /proc; 0 where unknown.
func rssKB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// BenchmarkFirstSearch: the first files_grep of a workspace, through the
// shim, right after the workspace opened on a fresh flyd (its index just
// built, its content cache empty: the warmer starts with this search), against a
// cold rg process on the same tree in the same iteration, with the page
// cache warm for both. ratio is rg/fly (goal > 1).
func BenchmarkFirstSearch(b *testing.B) {
	rg := flytest.Ripgrep(b)
	root := largeWorkspace(b)
	for _, tc := range flytest.GrepCases {
		b.Run(tc.Name, func(b *testing.B) {
			flytest.RunRipgrep(b, rg, root, tc) // the page cache holds the tree from here on
			var fly, base time.Duration
			for b.Loop() {
				b.StopTimer()
				e := flytest.NewEnv(b)
				d := flytest.StartFlyd(b, e, "--log-level", "info")
				cs := viaShim(e)(b, "first", root, nil) // opens the workspace: the index is built
				b.StartTimer()
				start := time.Now()
				var g mcpserver.GrepResult
				res := callTool(b, cs, "files_grep", map[string]any{"pattern": tc.Pattern, "literal": tc.Literal, "limit": 1000}, &g)
				fly += time.Since(start)
				if res.IsError || g.Truncated {
					b.Fatalf("files_grep: %s", toolText(res))
				}
				took, want := flytest.RunRipgrep(b, rg, root, tc)
				base += took
				if g.Matches != want {
					b.Fatalf("files_grep found %d matches, rg %d", g.Matches, want)
				}
				b.StopTimer()
				cs.Close()
				d.Stop(b)
				b.StartTimer()
			}
			b.ReportMetric(float64(fly.Microseconds())/float64(b.N)/1000, "ms/fly")
			b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "ms/rg")
			b.ReportMetric(float64(base)/float64(fly), "ratio")
		})
	}
}
