package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
)

// writeUpstreamsFile writes e's upstreams.json with these servers.
func writeUpstreamsFile(t *testing.T, e *flytest.Env, servers map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.Paths.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.Upstreams(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCrashLoopingUpstreamKeepsRunsBounded: an upstream that dies at
// every start, while flyd runs, keeps the runs list within its bound and
// never pushes the user's runs out of it.
func TestCrashLoopingUpstreamKeepsRunsBounded(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	writeUpstreamsFile(t, e, map[string]any{
		"crashy": map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo crashing >&2; exit 3"}},
	})
	flytest.StartFlyd(t, e, "--keep-runs", "2")
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	cs := viaShim(e)(t, "agent", root, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil { // starts the upstream
		t.Fatal(err)
	}
	for range 3 {
		if res := callTool(t, cs, "flutter_devices", nil, nil); res.IsError {
			t.Fatalf("flutter_devices: %s", toolText(res))
		}
	}
	flytest.Eventually(t, "the upstream restarted 3 times", func() bool {
		st, err := getStatus(e)
		return err == nil && len(st.Upstreams) == 1 && st.Upstreams[0].Restarts >= 3
	})
	resp, err := e.HTTPClient().Get("http://flyd" + wire.RouteRuns)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Runs []wire.Run `json:"runs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range list.Runs {
		if !r.Live() {
			kinds[r.Kind]++
		}
	}
	if kinds["tool"] != 2 || kinds["upstream"] > 2 {
		t.Fatalf("finished records with --keep-runs 2 after 3 commands and 3 upstream restarts: %v; want the 2 newest commands and at most 2 upstream records", kinds)
	}
}
