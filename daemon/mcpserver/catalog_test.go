package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolListBudget: flyd's own tools, as tools/list sends them, fit in
// 6 KB (about 1,500 tokens an agent pays in every session), and the
// instructions in 1 KB.
func TestToolListBudget(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "budget", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list: %d tools, %d bytes; instructions %d bytes", len(res.Tools), len(b), len(instructions))
	if len(b) > toolsBudget {
		for _, tl := range res.Tools {
			tb, _ := json.Marshal(tl)
			t.Logf("%-20s %4d bytes", tl.Name, len(tb))
		}
		t.Errorf("flyd's tools/list is %d bytes, over its budget of %d", len(b), toolsBudget)
	}
	if len(instructions) > 1<<10 {
		t.Errorf("the instructions are %d bytes, over 1 KB", len(instructions))
	}
	for _, tl := range res.Tools {
		if tl.OutputSchema != nil || tl.Title != "" || tl.Description == "" || strings.Contains(tl.Description, "Old name") {
			t.Errorf("%s: listed with an output schema, a title, an old name or no description", tl.Name)
		}
	}
}

// TestOldToolNames: the tools merged into others still answer under
// their old names, unlisted.
func TestOldToolNames(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "old", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if s.srv.tools[tl.Name].hidden {
			t.Errorf("old name %s is listed", tl.Name)
		}
	}
	for name, tl := range s.srv.tools {
		if tl.hidden {
			// Each is registered with the SDK: a call reaches its handler,
			// which refuses the missing arguments in its own words.
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"run_id": "nope"}})
			if err != nil && strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("%s: %v", name, err)
			}
			_ = r
		}
	}
}

// TestFilterTerms: flyd accepts what it knows and refuses a term that
// names nothing.
func TestFilterTerms(t *testing.T) {
	s := newSurface(t, nil)
	for _, ok := range [][]string{{"app"}, {"files", "sdk"}, {"flutter_run"}, {"dart_*"}, {"dart_pub"}, {"upstream"}, {"all"}} {
		f, err := toolfilter.Parse(ok, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.srv.CheckFilter(f); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	f, _ := toolfilter.Parse([]string{"app"}, []string{"lgos"})
	if err := s.srv.CheckFilter(f); err == nil || !strings.Contains(err.Error(), `"lgos"`) {
		t.Errorf("a typo: %v", err)
	}
	// Presets and categories match by tag.
	app, _ := toolfilter.Parse([]string{"app"}, nil)
	for name, want := range map[string]bool{"flutter_run": true, "flutter_hot_restart": true, "logs_read": true, "files_grep": false, "flutter_claim": false} {
		if ok, _ := app.Allows(name, s.srv.tagsOf(name)); ok != want {
			t.Errorf("app allows %s = %v, want %v", name, ok, want)
		}
	}
}

// TestFilesRead: a file's lines, numbered and paged; what is not served
// is refused as resources/read refuses it.
func TestFilesRead(t *testing.T) {
	var big strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&big, "line %d of a long file\n", i)
	}
	s := newSurface(t, map[string]string{
		"pubspec.yaml":   "name: demo\n",
		"lib/main.dart":  "void main() {\r\n  print('hi');\r\n}",
		"lib/big.dart":   big.String(),
		"lib/wide.dart":  strings.Repeat("x", 10_000) + "\nnext\n",
		".env":           "SECRET=1\n",
		"build/out.dart": "x\n",
	})
	cs := s.connect(t, "reader", nil)
	call := func(args map[string]any) (string, readResult, bool) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files_read", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var out readResult
		if res.StructuredContent != nil {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
		}
		return res.Content[0].(*mcp.TextContent).Text, out, res.IsError
	}
	if text, out, isErr := call(map[string]any{"path": "lib/main.dart"}); isErr || text != "1\tvoid main() {\n2\t  print('hi');\n3\t}\n" || out.Total != 3 || out.Truncated {
		t.Errorf("lib/main.dart = %q %+v", text, out)
	}
	text, out, _ := call(map[string]any{"path": "lib/big.dart"})
	if !out.Truncated || out.NextLine < 500 || len(text) > 17<<10 || !strings.HasPrefix(text, "1\tline 1 of") || !strings.Contains(text, "call again with line=") {
		t.Errorf("a long file's first page: %+v, %d bytes", out, len(text))
	}
	if text, out, _ := call(map[string]any{"path": "lib/big.dart", "line": 2999}); out.Truncated || out.Total != 3000 || text != "2999\tline 2999 of a long file\n3000\tline 3000 of a long file\n" {
		t.Errorf("the end of a long file = %q %+v", text, out)
	}
	if text, out, _ := call(map[string]any{"path": "lib/big.dart", "line": 10, "lines": 2}); text != "10\tline 10 of a long file\n11\tline 11 of a long file\n… 2989 more lines: call again with line=12\n" || out.NextLine != 12 {
		t.Errorf("two lines from 10 = %q %+v", text, out)
	}
	if text, _, _ := call(map[string]any{"path": "lib/wide.dart"}); !strings.Contains(text, "… (line cut)\n2\tnext\n") || len(text) > 5<<10 {
		t.Errorf("a 10 KB line = %d bytes: %.80q", len(text), text)
	}
	for _, bad := range []string{".env", "build/out.dart", "../etc/passwd", "lib/none.dart"} {
		if text, _, isErr := call(map[string]any{"path": bad}); !isErr || text == "" {
			t.Errorf("files_read %s was not refused: %q", bad, text)
		}
	}
	if text, _, isErr := call(map[string]any{"path": "lib/main.dart", "line": 9}); !isErr || !strings.Contains(text, "past the end") {
		t.Errorf("a line past the end: %q", text)
	}
}

// TestMergedToolsRefuse: a merged tool says what its fields take.
func TestMergedToolsRefuse(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "merged", nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"flutter_inspect", map[string]any{"what": "bogus"}, "not widgets or screenshot"},
		{"flutter_inspect", map[string]any{"what": "widgets", "max_width": 100}, "max_width is for what: screenshot"},
		{"flutter_sdk", map[string]any{"command": "create"}, "create needs directory"},
		{"flutter_run", map[string]any{"attach": "app-0123456789", "device": "linux"}, "attach takes no other field"},
		{"flutter_run", map[string]any{"attach": "app-0123456789"}, "no app \"app-0123456789\""},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v = %v %q, want an error saying %q", tc.tool, tc.args, res.IsError, text, tc.want)
		}
	}
}
