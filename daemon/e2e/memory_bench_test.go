package e2e

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
)

// BenchmarkClientMemory: ten editor windows on the indexed 100k-file
// tree, each with its own MCP server: through flyd (flyd + 10 shims, each
// after a first listing and a read) against ten
// @modelcontextprotocol/server-filesystem processes (each after a first
// listing and a read). Reports PSS in MiB of each side, ratio = fly /
// server-filesystem (goal ≤ 0.1), and one shim's RSS and PSS in KiB.
// Linux only (PSS is read from /proc); skipped with a note when
// server-filesystem is not installed.
func BenchmarkClientMemory(b *testing.B) {
	root := largeWorkspace(b)
	if serverFilesystem(b, root) == nil {
		b.Skip("server-filesystem is not installed (run the conformance tests once, or npm ci in testdata/conformance)")
	}
	e := flytest.NewEnv(b)
	d := flytest.StartFlyd(b, e, "--log-level", "info")
	read := `"method":"resources/read","params":{"uri":"workspace:///pubspec.yaml"}`
	for b.Loop() {
		var shims []int
		var closers []func()
		for range 10 {
			r := newRawShim(b, e, root)
			r.roundTrip(b, `"method":"resources/list"`)
			r.roundTrip(b, read)
			shims = append(shims, r.pid)
			closers = append(closers, r.close)
		}
		var fss []int
		for range 10 {
			r := newRawClient(b, serverFilesystem(b, root))
			r.roundTrip(b, `"method":"tools/call","params":{"name":"list_directory","arguments":{"path":`+strconv.Quote(root)+`}}`)
			r.roundTrip(b, `"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":`+strconv.Quote(root+"/pubspec.yaml")+`}}`)
			fss = append(fss, r.pid)
			closers = append(closers, r.close)
		}
		flyd := pss(b, d.Cmd.Process.Pid)
		shimPSS := sumPSS(b, shims)
		fs := sumPSS(b, fss)
		b.ReportMetric(float64(flyd)/(1<<20), "MiB-flyd")
		b.ReportMetric(float64(shimPSS)/(1<<20), "MiB-10-shims")
		b.ReportMetric(float64(flyd+shimPSS)/(1<<20), "MiB-fly")
		b.ReportMetric(float64(fs)/(1<<20), "MiB-server-filesystem")
		b.ReportMetric(float64(flyd+shimPSS)/float64(fs), "ratio")
		b.ReportMetric(float64(smapsKB(b, shims[0], "Rss:")), "KiB-rss-shim")
		b.ReportMetric(float64(shimPSS)/10/1024, "KiB-pss-shim")
		for _, c := range closers {
			c()
		}
	}
}

// smapsKB is one field of pid's smaps_rollup, in KiB.
func smapsKB(b *testing.B, pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		b.Skipf("no smaps_rollup (%v): memory is measured on Linux only", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}
