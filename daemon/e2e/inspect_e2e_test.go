package e2e

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLookInside: through the shim, an agent reads the widget tree its
// project built (located, within about 8 KB, more on request) and sees
// the screen as a PNG within its caps; a release build, a profile build
// and a backend that cannot capture say so instead of hanging.
func TestLookInside(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvWidgets+"=600")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "agent", root, nil)
	run := func(c *mcp.ClientSession, args map[string]any) string {
		t.Helper()
		var out mcpserver.RunResult
		if res := callTool(t, c, "flutter_run", args, &out); res.IsError {
			t.Fatalf("flutter_run: %s", toolText(res))
		}
		// The run is flyd's: the first session, which outlives the
		// others, stops it if the test did not.
		t.Cleanup(func() { callTool(t, cs, "flutter_stop", map[string]any{"run_id": out.RunID}, nil) })
		return out.RunID
	}
	id := run(cs, nil)

	var tree mcpserver.WidgetTreeResult
	res := callTool(t, cs, "flutter_inspect", nil, &tree)
	text := toolText(res)
	if res.IsError || !strings.HasPrefix(text, "MyApp  lib/main.dart:8\n  MaterialApp  lib/main.dart:14\n    MyHomePage  lib/main.dart:16\n") ||
		!strings.Contains(text, "ItemTile  lib/widgets/item_tile.dart:9\n") || len(text) > 8<<10+200 || !tree.Truncated || tree.Widgets != 2409 {
		t.Errorf("widget tree (%d bytes) = %+v:\n%.400s", len(text), tree, text)
	}
	res = callTool(t, cs, "flutter_inspect", map[string]any{"run_id": id, "what": "widgets", "max_bytes": 256 << 10}, &tree)
	if res.IsError || tree.Truncated || tree.Shown != 2409 {
		t.Errorf("the whole tree on request = %+v", tree)
	}

	res = callTool(t, cs, "flutter_inspect", map[string]any{"what": "screenshot"}, nil)
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if res.IsError || img == nil || img.MIMEType != "image/png" || len(img.Data) > 256<<10 {
		t.Fatalf("screenshot = %v %s", res.IsError, toolText(res))
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != 540 || cfg.Height != 1200 {
		t.Errorf("screenshot = %+v, %v; want 540×1200 from the app's 1080×2400", cfg, err)
	}
	res = callTool(t, cs, "flutter_inspect", map[string]any{"what": "screenshot", "max_width": 1080, "max_bytes": 4 << 20}, nil)
	if !strings.Contains(toolText(res), ": 1080×2400 (the app drew 1080×2400)") {
		t.Errorf("a bigger cap on request: %s", toolText(res))
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": id}, nil)

	// An app that registers the inspector late (a slow first frame) is
	// waited for.
	t.Run("inspector late", func(t *testing.T) {
		c := viaShimWith(e, fakeflutter.EnvInspectorDelayMS+"=1500")(t, "late", root, nil)
		id := run(c, nil)
		var tree mcpserver.WidgetTreeResult
		// (by the tool's old name, which still answers)
		if res := callTool(t, c, "flutter_widget_tree", nil, &tree); res.IsError || tree.Widgets == 0 {
			t.Errorf("the widget tree of an app whose inspector came late = %v %s", res.IsError, toolText(res))
		}
		callTool(t, c, "flutter_stop", map[string]any{"run_id": id}, nil)
	})
	for _, tc := range []struct {
		name, mode, what, want string
		vars                   []string
	}{
		{"release", "release", "widgets", "is a release build: it has no VM service", nil},
		{"release screenshot", "release", "screenshot", "is a release build", nil},
		{"profile", "profile", "widgets", "is a profile build: the widget inspector exists only in debug builds", nil},
		{"no capture", "", "screenshot", "Could not capture image screenshot.", []string{fakeflutter.EnvNoScreenshot + "=1"}},
		{"inspector never registered", "", "widgets", "has not registered the widget inspector within 5s", []string{fakeflutter.EnvInspectorDelayMS + "=600000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := viaShimWith(e, tc.vars...)(t, tc.name, root, nil)
			args := map[string]any{}
			if tc.mode != "" {
				args["mode"] = tc.mode
			}
			id := run(c, args)
			res := callTool(t, c, "flutter_inspect", map[string]any{"what": tc.what}, nil)
			if !res.IsError || !strings.Contains(toolText(res), tc.want) {
				t.Errorf("flutter_inspect %s = %v %q, want an error saying %q", tc.what, res.IsError, toolText(res), tc.want)
			}
			callTool(t, c, "flutter_stop", map[string]any{"run_id": id}, nil)
		})
	}
}
