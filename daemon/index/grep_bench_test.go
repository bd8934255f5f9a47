package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
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
	rg := flytest.Ripgrep(b)
	root := grepTree(b)
	x, err := openIndex(root, DefaultRules(), nil, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range flytest.GrepCases {
		b.Run(tc.Name, func(b *testing.B) {
			re, err := CompilePattern(tc.Pattern, tc.Literal, false)
			if err != nil {
				b.Fatal(err)
			}
			opt := GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}
			flytest.RunRipgrep(b, rg, root, tc) // the page cache holds the tree from here on
			var fly, base time.Duration
			for b.Loop() {
				x.cache.drop(nil, true)
				start := time.Now()
				n := grepCount(b, x, opt)
				fly += time.Since(start)
				took, want := flytest.RunRipgrep(b, rg, root, tc)
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
