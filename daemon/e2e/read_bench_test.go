package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
)

// serverFilesystem returns the command that runs
// @modelcontextprotocol/server-filesystem from testdata/conformance on
// dirs, or "" when it is not installed (npm ci there, or run the
// conformance tests once).
func serverFilesystem(b *testing.B, dirs ...string) *exec.Cmd {
	bin := filepath.Join(conformanceDir(b), "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "mcp-server-filesystem")); err != nil {
		return nil
	}
	return exec.Command(filepath.Join(bin, "node"), append([]string{filepath.Join(bin, "mcp-server-filesystem")}, dirs...)...)
}

// dartSource is n bytes of Dart-like text: quotes, backslashes and
// newlines, which JSON must escape, as a real file has.
func dartSource(n int) []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "  final w%06d = Text('item \\$i \"%d\"', style: const TextStyle(fontSize: 14));\n", i, i)
	}
	return []byte(sb.String()[:n])
}

// BenchmarkBigRead: a whole read of a 200 KB and a 1 MiB Dart file
// through flyctl mcp and flyd (resources/read), against
// @modelcontextprotocol/server-filesystem's read_text_file on the same
// file (skipped with a note when it is not installed). Both clients speak
// raw JSON-RPC lines, so the timings hold the servers and the hop, not a
// client library's decoding. Reports p50s and ratio = fly/server-filesystem
// (goal ≤ 1.0).
func BenchmarkBigRead(b *testing.B) {
	root := b.TempDir()
	e := flytest.NewEnv(b)
	flytest.StartFlyd(b, e, "--log-level", "info")
	for _, size := range []int{200 << 10, 1 << 20} {
		name := fmt.Sprintf("size=%dKiB", size>>10)
		rel := "lib/big" + strconv.Itoa(size>>10) + ".dart"
		writeTree(b, root, map[string]string{rel: string(dartSource(size))})
		b.Run(name, func(b *testing.B) {
			fly := newRawShim(b, e, root)
			read := func() time.Duration {
				start := time.Now()
				line := fly.roundTrip(b, `"method":"resources/read","params":{"uri":"workspace:///`+rel+`"}`)
				d := time.Since(start)
				if !strings.Contains(line, `"total":`+strconv.Itoa(size)) {
					b.Fatalf("resources/read: %.300s", line)
				}
				return d
			}
			var fs *rawShim
			abs := filepath.Join(root, rel)
			if cmd := serverFilesystem(b, root); cmd != nil {
				fs = newRawClient(b, cmd)
			} else {
				b.Log("server-filesystem is not installed (run the conformance tests once, or npm ci in testdata/conformance): no baseline")
			}
			readFS := func() time.Duration {
				start := time.Now()
				line := fs.roundTrip(b, `"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":`+strconv.Quote(abs)+`}}`)
				d := time.Since(start)
				if len(line) < size || strings.Contains(line, `"isError":true`) {
					b.Fatalf("read_text_file: %.300s", line)
				}
				return d
			}
			for range 10 { // warm both
				read()
				if fs != nil {
					readFS()
				}
			}
			var tFly, tFS []time.Duration
			for b.Loop() {
				for range 30 {
					tFly = append(tFly, read())
					if fs != nil {
						tFS = append(tFS, readFS())
					}
				}
			}
			reportLatency(b, "fly", tFly)
			if fs != nil {
				reportLatency(b, "server-filesystem", tFS)
				b.ReportMetric(ratio(p50(tFly), p50(tFS)), "ratio-p50")
			}
		})
	}
}
