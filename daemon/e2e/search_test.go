package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSearchStaysInside: files_find and files_grep over a tree with
// skipped directories, secrets, binaries and links out return only the
// served files; new files are found once the watcher has seen them, and
// deleted ones disappear; completion offers the index's paths.
func TestSearchStaysInside(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	parent := t.TempDir()
	root := filepath.Join(parent, "app")
	const needle = "NEEDLE"
	writeTree(t, parent, map[string]string{
		"app/pubspec.yaml":           "name: app # " + needle + "\n",
		"app/lib/main.dart":          "void main() {} // " + needle + "\n",
		"app/lib/src/util.dart":      "// " + needle + " twice\n// " + needle + "\n",
		"app/build/out.dart":         needle,
		"app/.dart_tool/x.dart":      needle,
		"app/.env":                   needle,
		"app/android/key.properties": needle,
		"app/lib/data.dart":          "\x00binary " + needle,
		"app/.ssh/config.json":       needle,
		"app/lib/bad\xffname.dart":   needle, // not UTF-8: left out everywhere
		"app/lib/bad\xfedir/x.dart":  needle,
		"outside/secret.dart":        needle,
	})
	mustSymlink(t, filepath.Join(parent, "outside"), filepath.Join(root, "lib", "out"))
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "searcher", root, nil)

	var found mcpserver.FindResult
	if res := callTool(t, cs, "files_find", map[string]any{"glob": "**/*.dart"}, &found); res.IsError {
		t.Fatalf("files_find: %s", toolText(res))
	}
	want := []string{"workspace:///lib/data.dart", "workspace:///lib/main.dart", "workspace:///lib/src/util.dart"}
	if !slices.Equal(found.URIs, want) || found.Total != 3 {
		t.Errorf("files_find **/*.dart = %v (total %d), want %v", found.URIs, found.Total, want)
	}

	if uris, _ := listAll(t, cs); slices.ContainsFunc(uris, func(u string) bool { return strings.Contains(u, "bad") }) {
		t.Errorf("resources/list serves a file whose name is not UTF-8: %v", uris)
	}

	var grep mcpserver.GrepResult
	if res := callTool(t, cs, "files_grep", map[string]any{"pattern": needle, "literal": true}, &grep); res.IsError {
		t.Fatalf("files_grep: %s", toolText(res))
	}
	var got []string
	for _, f := range grep.Files {
		for _, m := range f.Matches {
			got = append(got, f.URI+":"+m.Text)
		}
	}
	wantGrep := []string{
		"workspace:///lib/main.dart:void main() {} // NEEDLE",
		"workspace:///lib/src/util.dart:// NEEDLE twice",
		"workspace:///lib/src/util.dart:// NEEDLE",
		"workspace:///pubspec.yaml:name: app # NEEDLE",
	}
	if !slices.Equal(got, wantGrep) || grep.SkippedBinary != 1 {
		t.Errorf("files_grep %s = %q (binary skipped %d), want %q and one binary skipped", needle, got, grep.SkippedBinary, wantGrep)
	}

	// A searched (so cached) file that changes is searched as it is now.
	writeTree(t, root, map[string]string{"lib/src/util.dart": "// changed\n"})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var g mcpserver.GrepResult
		callTool(t, cs, "files_grep", map[string]any{"pattern": "changed|" + needle + " twice"}, &g)
		if g.Matches == 1 && g.Files[0].Matches[0].Text == "// changed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files_grep still sees the old contents of util.dart: %+v", g)
		}
	}

	// A file made during the session is found; a deleted one is gone.
	writeTree(t, root, map[string]string{"lib/later.dart": "// " + needle + " later\n"})
	os.Remove(filepath.Join(root, "lib", "main.dart"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		callTool(t, cs, "files_find", map[string]any{"glob": "lib/*.dart"}, &found)
		if slices.Contains(found.URIs, "workspace:///lib/later.dart") && !slices.Contains(found.URIs, "workspace:///lib/main.dart") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after adding later.dart and deleting main.dart, files_find lists %v", found.URIs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	callTool(t, cs, "files_grep", map[string]any{"pattern": "later$", "glob": "lib/**"}, &grep)
	if grep.Matches != 1 || grep.Files[0].URI != "workspace:///lib/later.dart" {
		t.Errorf("files_grep after the change = %+v", grep)
	}

	// Completion of the file template, from the index.
	cr, err := cs.Complete(context.Background(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "workspace:///{+path}"},
		Argument: mcp.CompleteParamsArgument{Name: "path", Value: "lib/s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cr.Completion.Values, []string{"lib/src/util.dart"}) {
		t.Errorf("completion of lib/s = %v, want lib/src/util.dart", cr.Completion.Values)
	}

	// Bad input is refused with a reason.
	for _, args := range []map[string]any{{"glob": "/etc/*"}, {"glob": "lib/{a"}} {
		if res := callTool(t, cs, "files_find", args, nil); !res.IsError && !strings.Contains(toolText(res), "glob") {
			t.Errorf("files_find %v = %s, want a refusal", args, toolText(res))
		}
	}
}

// TestGrepCacheBudget: flyd keeps what files_grep reads within the
// budget flyd run --grep-cache-mb sets, and says so in its status; with
// 0 it keeps nothing and searches still answer, from the disk.
func TestGrepCacheBudget(t *testing.T) {
	t.Parallel() // its own flyds: they wait mostly, so they overlap the others
	root := t.TempDir()
	files := map[string]string{"pubspec.yaml": "name: app\n"}
	for i := range 50 {
		files[fmt.Sprintf("lib/f%d.dart", i)] = fmt.Sprintf("class F%d {} // NEEDLE\n", i)
	}
	writeTree(t, root, files)
	for _, c := range []struct {
		mb        string
		limit     int64
		keepsSome bool
	}{{"1", 1 << 20, true}, {"0", 0, false}} {
		e := flytest.NewEnv(t)
		d := flytest.StartFlyd(t, e, "--grep-cache-mb", c.mb)
		cs := viaShim(e)(t, "searcher", root, nil)
		var grep mcpserver.GrepResult
		if res := callTool(t, cs, "files_grep", map[string]any{"pattern": "NEEDLE", "literal": true}, &grep); res.IsError || grep.Matches != 50 {
			t.Fatalf("--grep-cache-mb %s: files_grep found %d: %s", c.mb, grep.Matches, toolText(res))
		}
		st, err := getStatus(e)
		if err != nil {
			t.Fatal(err)
		}
		if st.GrepCache.Limit != c.limit || (st.GrepCache.Bytes > 0) != c.keepsSome || st.GrepCache.Bytes > c.limit {
			t.Errorf("--grep-cache-mb %s: status says the grep cache holds %d bytes of %d", c.mb, st.GrepCache.Bytes, st.GrepCache.Limit)
		}
		if len(st.Workspaces) != 1 || int64(st.Workspaces[0].CacheBytes) != st.GrepCache.Bytes {
			t.Errorf("--grep-cache-mb %s: the workspace's part %+v, the whole %d", c.mb, st.Workspaces, st.GrepCache.Bytes)
		}
		cs.Close()
		d.Stop(t)
	}
}
