// Command benchtable reads `go test -bench` output on stdin and prints one
// table: for each benchmark and each ratio it reports (and each metric a
// goal names), the median over the runs (-count), their range, and the
// goal. It is the last step of the README's benchmark command:
//
//	go test -run '^$' -bench . -benchtime 1x -count 3 ./daemon/... | go run ./internal/benchtable
//
// Lines that are not benchmark results are passed to stderr, so that logs
// and skips stay visible.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// goals are the targets of the issues that asked for each measure, keyed
// by benchmark (without the -GOMAXPROCS suffix) and metric.
var goals = map[string]string{
	"BenchmarkShimHop ratio-p50":                  "≤ 1.2",
	"BenchmarkBigRead/size=200KiB ratio-p50":      "≤ 1.0",
	"BenchmarkBigRead/size=1024KiB ratio-p50":     "≤ 1.0",
	"BenchmarkFanout/followers=100 p99-µs":        "≤ 3000",
	"BenchmarkIngest ratio":                       "≥ 0.8",
	"BenchmarkFirstAnswer ratio":                  "≥ 100",
	"BenchmarkClientMemory ratio":                 "≤ 0.1",
	"BenchmarkIndexBuild/nowatch ratio":           "≤ 1.3",
	"BenchmarkSearch/find ratio":                  "≥ 1000",
	"BenchmarkSearch/grep-literal ratio":          "> 1",
	"BenchmarkSearch/grep-regexp ratio":           "> 1",
	"BenchmarkUpstreamMemory/gosdk ratio":         "≤ 0.25",
	"BenchmarkUpstreamMemory/everything ratio":    "≤ 0.25",
	"BenchmarkUpstreamCall/gosdk ratio":           "≤ 1.3",
	"BenchmarkUpstreamCall/everything ratio":      "≤ 1.3",
	"BenchmarkUpstreamWarmList/gosdk ratio":       "≥ 20",
	"BenchmarkUpstreamWarmList/everything ratio":  "≥ 20",
	"BenchmarkDashboardLog ms-p99":                "≤ 1000",
	"BenchmarkFanout/followers=100 ratio-p99":     "",
	"BenchmarkFanout/followers=100 p99-µs-bare":   "",
	"BenchmarkFanoutSubscribers p50-µs":           "",
	"BenchmarkFanoutSubscribers p99-µs":           "≤ 3000",
	"BenchmarkClientMemory KiB-pss-shim":          "",
	"BenchmarkFirstAnswer ms-fly":                 "",
	"BenchmarkFirstAnswer ms-server-filesystem":   "",
	"BenchmarkShimHop µs-p50-shim":                "",
	"BenchmarkShimHop µs-p50-stdio":               "",
	"BenchmarkErrorLatency ratio-p99":             "≤ 1.5",
	"BenchmarkErrorLatency err-p50-µs":            "",
	"BenchmarkErrorLatency err-p99-µs":            "",
	"BenchmarkErrorLatency log-p50-µs":            "",
	"BenchmarkErrorLatency log-p99-µs":            "",
	"BenchmarkErrorTokens/identical200 ratio":     "≤ 0.05",
	"BenchmarkErrorTokens/identical200 bytes":     "< 1024",
	"BenchmarkErrorTokens/distinct20 ratio":       "< 1",
	"BenchmarkWidgetTree widgets-full":            "≈ 2000",
	"BenchmarkDiscovery ms-p50":                   "≤ 1000",
	"BenchmarkDiscovery ms-p99":                   "",
	"BenchmarkWidgetTree bytes-full-json":         "",
	"BenchmarkWidgetTree bytes-text":              "≤ 8500",
	"BenchmarkWidgetTree ms-full":                 "",
	"BenchmarkWidgetTree ms-summary":              "",
	"BenchmarkToolList/own bytes":                 "≤ 6144",
	"BenchmarkToolList/with-gosdk bytes":          "",
	"BenchmarkToolList/with-gosdk bytes-app":      "",
	"BenchmarkToolList/with-everything bytes":     "",
	"BenchmarkToolList/with-everything bytes-app": "",
	"BenchmarkGrepCold/literal ratio":             "> 1",
	"BenchmarkGrepCold/regexp ratio":              "> 1",
	"BenchmarkFirstSearch/literal ratio":          "> 1",
	"BenchmarkFirstSearch/regexp ratio":           "> 1",
}

// suffix is the -GOMAXPROCS suffix go test adds to a benchmark's name.
var suffix = regexp.MustCompile(`-\d+$`)

func main() {
	rows, err := parse(os.Stdin, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	write(os.Stdout, rows)
}

// row is one metric of one benchmark, with a value per run.
type row struct {
	bench, metric string
	values        []float64
}

// parse reads benchmark result lines from r, in the order they first
// appear, and copies every other line to rest.
func parse(r io.Reader, rest io.Writer) ([]*row, error) {
	var rows []*row
	byKey := map[string]*row{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			fmt.Fprintln(rest, sc.Text())
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			fmt.Fprintln(rest, sc.Text())
			continue
		}
		bench := suffix.ReplaceAllString(f[0], "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			metric := f[i+1]
			if err != nil {
				break
			}
			key := bench + " " + metric
			if _, goal := goals[key]; !goal && !strings.HasPrefix(metric, "ratio") {
				continue
			}
			rw := byKey[key]
			if rw == nil {
				rw = &row{bench: bench, metric: metric}
				byKey[key] = rw
				rows = append(rows, rw)
			}
			rw.values = append(rw.values, v)
		}
	}
	return rows, sc.Err()
}

// write prints rows as an aligned table.
func write(w io.Writer, rows []*row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tmetric\tmedian\trange\truns\tgoal")
	for _, r := range rows {
		s := slices.Clone(r.values)
		slices.Sort(s)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s–%s\t%d\t%s\n", strings.TrimPrefix(r.bench, "Benchmark"), r.metric,
			num(s[len(s)/2]), num(s[0]), num(s[len(s)-1]), len(s), goals[r.bench+" "+r.metric])
	}
	tw.Flush()
}

// num prints v with three significant digits, or as an integer from 1000.
func num(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
