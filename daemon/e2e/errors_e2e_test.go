package e2e

import (
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
)

// TestAppErrorsReachAgents: framework errors that flutter run --machine
// never prints (the app posts them on its VM service) reach, through the
// shim and the real flyd, the run's log and flutter_errors, located in
// the project and deduplicated: 200 identical overflows are one line
// under 1 KB. A client that never subscribed to anything gets them.
func TestAppErrorsReachAgents(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvErrorsAtStart+"="+strings.Repeat("overflow,", 199)+"overflow")
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "agent", flutterProject(t), nil)
	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	defer callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil)

	var out mcpserver.ErrorsResult
	flytest.Eventually(t, "200 errors in flutter_errors", func() bool {
		callTool(t, cs, "flutter_errors", nil, &out)
		return out.Total == 200
	})
	res := callTool(t, cs, "flutter_errors", nil, &out)
	text := toolText(res)
	if len(out.Errors) != 1 || out.Errors[0].Count != 200 || out.Errors[0].Location != "lib/main.dart:30:12" || out.RunID != run.RunID {
		t.Fatalf("flutter_errors = %+v", out)
	}
	if !strings.HasPrefix(text, "200× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12\n") || len(text) > 1<<10 {
		t.Errorf("flutter_errors text (%d bytes) = %q", len(text), text)
	}
	// Nothing new since the cursor.
	if res := callTool(t, cs, "flutter_errors", map[string]any{"since": out.NextSince}, nil); !strings.HasPrefix(toolText(res), "no new errors") {
		t.Errorf("flutter_errors since the cursor = %q, want no new errors", toolText(res))
	}
	var page mcpserver.LogsReadResult
	logs := toolText(callTool(t, cs, "logs_read", map[string]any{"run_id": run.RunID, "grep": "EXCEPTION CAUGHT BY RENDERING LIBRARY"}, &page))
	if page.Entries != 1 || !strings.Contains(logs, " error ") {
		t.Errorf("the run's log has %d error blocks, want the first in full (stream error):\n%.300s", page.Entries, logs)
	}
}
