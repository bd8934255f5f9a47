package mcpserver

import (
	"context"
	"encoding/json"
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
