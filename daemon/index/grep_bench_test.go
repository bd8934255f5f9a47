package index

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// grepTree writes the daemon benchmarks' 100k-file tree (FLY_BENCH_FILES
// files of lib/, each a small widget) once per test binary run.
func grepTree(b *testing.B) string {
	b.Helper()
	n := 100_000
	if s := os.Getenv("FLY_BENCH_FILES"); s != "" {
		fmt.Sscan(s, &n)
	}
	root := idxTempDir(b)
	if err := os.WriteFile(filepath.Join(root, "pubspec.yaml"), []byte("name: big\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		dir := filepath.Join(root, "lib", fmt.Sprintf("f%03d", i/1000), fmt.Sprintf("d%02d", (i/40)%25))
		if i%40 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		src := fmt.Sprintf("// w%06d\nimport 'package:flutter/widgets.dart';\n\nclass W%06d extends StatelessWidget {\n  const W%06d({super.key});\n}\n", i, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("w%06d.dart", i)), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// grepCount runs a whole search, page after page, and returns its matches.
func grepCount(b *testing.B, x *Index, opt GrepOptions) int {
	n := 0
	for {
		pg, err := x.Grep(context.Background(), x.Root(), opt)
		if err != nil {
			b.Fatal(err)
		}
		n += pg.Matches
		if !pg.Truncated {
			return n
		}
		opt.After, opt.AfterLine = pg.NextPath, pg.NextLine
	}
}

// BenchmarkGrepCold: a search with the page cache warm and flyd's content
// cache empty (what the first search of a workspace meets when nothing
// warmed it), against a cold rg process on the same tree in the same
// iteration. ratio is rg/fly: above 1, fly is faster.
//
//	go test -run '^$' -bench GrepCold -benchtime 5x ./daemon/index/
func BenchmarkGrepCold(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not installed (apt-get install ripgrep): no baseline")
	}
	root := grepTree(b)
	x, err := openIndex(root, DefaultRules(), nil, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, pattern string
		literal       bool
		rgArgs        []string
	}{
		{"literal", "W012345", true, []string{"-F", "W012345"}},
		{"regexp", `W0123\d\d\b`, false, []string{`W0123\d\d\b`}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			re, err := CompilePattern(tc.pattern, tc.literal, false)
			if err != nil {
				b.Fatal(err)
			}
			opt := GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}
			run := func() (time.Duration, int) {
				start := time.Now()
				out, err := exec.Command(rg, append([]string{"--no-heading", "-n"}, append(tc.rgArgs, root)...)...).Output()
				if err != nil {
					b.Fatalf("rg: %v", err)
				}
				return time.Since(start), bytes.Count(out, []byte("\n"))
			}
			run() // the page cache holds the tree from here on
			var fly, base time.Duration
			for b.Loop() {
				x.cache.drop(nil, true)
				start := time.Now()
				n := grepCount(b, x, opt)
				fly += time.Since(start)
				took, want := run()
				base += took
				if n != want {
					b.Fatalf("fly found %d matches, rg %d", n, want)
				}
			}
			b.ReportMetric(float64(fly.Microseconds())/float64(b.N)/1000, "ms/fly")
			b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "ms/rg")
			b.ReportMetric(float64(base)/float64(fly), "ratio")
		})
	}
}
