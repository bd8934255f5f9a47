package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTable: results of three runs become one row per ratio (and per
// metric a goal names), with the median, the range and the goal; other
// lines go to stderr.
func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkShimHop-2   1   3713557 ns/op   1.5 ratio-p50   900 µs-p50-shim   12 other
BenchmarkShimHop-2   1   3713557 ns/op   1.3 ratio-p50   880 µs-p50-shim   13 other
BenchmarkShimHop-2   1   3713557 ns/op   1.4 ratio-p50   870 µs-p50-shim   14 other
--- BENCH: BenchmarkShimHop-2
    bench_test.go:1: a log line
BenchmarkFanout/followers=100-2   1   1 ns/op   2500 p99-µs   1.9 ratio-p99
PASS
`
	var rest, out bytes.Buffer
	rows, err := parse(strings.NewReader(in), &rest)
	if err != nil {
		t.Fatal(err)
	}
	write(&out, rows)
	for _, want := range []string{
		"ShimHop                  ratio-p50     1.4     1.3–1.5  3     ≤ 1.2",
		"ShimHop                  µs-p50-shim   880     870–900  3",
		"Fanout/followers=100     p99-µs        2500    2500–2500  1   ≤ 3000",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "other") {
		t.Errorf("table has a metric with neither a ratio nor a goal:\n%s", out.String())
	}
	if !strings.Contains(rest.String(), "a log line") || !strings.Contains(rest.String(), "PASS") {
		t.Errorf("other lines were not passed on: %q", rest.String())
	}
}
