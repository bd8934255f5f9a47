package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/inspect"
	"github.com/fly-dev/fly/internal/fakeflutter"
)

// BenchmarkWidgetTree: an app whose full widget tree holds about 2,000
// widgets (the fake's 140 list items under the framework's own widgets).
// It times getRootWidgetTree over the run's VM-service connection, full
// and summary, and measures what an agent would read: the full answer's
// JSON, the summary's JSON, and flutter_widget_tree's text of the summary
// (at most 8 KB by default, and whole). Reports bytes, ms and ratio =
// default text bytes / full JSON bytes.
func BenchmarkWidgetTree(b *testing.B) {
	s, _, root, _ := benchFlyd(b, daemon.Config{})
	r := startRun(b, s, root, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvWidgets+"=140")
	defer r.Stop(context.Background())
	<-r.Started()
	<-r.VMReady()
	fetch := func(summary bool) (json.RawMessage, time.Duration) {
		var res struct {
			Result json.RawMessage `json:"result"`
		}
		start := time.Now()
		flag := "false"
		if summary {
			flag = "true"
		}
		if err := r.CallVM(b.Context(), "ext.flutter.inspector.getRootWidgetTree",
			map[string]any{"groupName": "bench", "isSummaryTree": flag, "fullDetails": "false"}, 10*time.Second, &res); err != nil {
			b.Fatal(err)
		}
		return res.Result, time.Since(start)
	}
	var full, summary json.RawMessage
	var fullT, sumT, textT time.Duration
	var text, whole inspect.Tree
	for b.Loop() {
		var d time.Duration
		full, d = fetch(false)
		fullT += d
		summary, d = fetch(true)
		sumT += d
		start := time.Now()
		var err error
		if text, err = inspect.Summarize(summary, root, inspect.TreeOptions{}); err != nil {
			b.Fatal(err)
		}
		textT += time.Since(start)
		whole, _ = inspect.Summarize(summary, root, inspect.TreeOptions{MaxBytes: 1 << 20})
	}
	n := float64(b.N)
	b.ReportMetric(float64(strings.Count(string(full), `"description"`)), "widgets-full")
	b.ReportMetric(float64(len(full)), "bytes-full-json")
	b.ReportMetric(float64(len(summary)), "bytes-summary-json")
	b.ReportMetric(float64(len(whole.Text)), "bytes-text-whole")
	b.ReportMetric(float64(len(text.Text)), "bytes-text")
	b.ReportMetric(fullT.Seconds()*1000/n, "ms-full")
	b.ReportMetric(sumT.Seconds()*1000/n, "ms-summary")
	b.ReportMetric(textT.Seconds()*1000/n, "ms-text")
	b.ReportMetric(float64(len(text.Text))/float64(len(full)), "ratio")
}
