package mcpserver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/toolfilter"
)

// TestToolCatalog: tools/list holds exactly toolfilter's catalog, so the presets that help texts list from the catalog are the
// tools a filter lets through.
func TestToolCatalog(t *testing.T) {
	s := newSurface(t, nil)
	cs := s.connect(t, "catalog", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed, catalog []string
	for _, tl := range res.Tools {
		listed = append(listed, tl.Name)
	}
	for _, tl := range toolfilter.Tools {
		catalog = append(catalog, tl.Name)
	}
	slices.Sort(catalog)
	if !slices.Equal(listed, catalog) {
		t.Errorf("tools/list = %v, want toolfilter.Tools %v", listed, catalog)
	}
	// Each group's tools pass a filter of that group's name, and no other
	// of flyd's tools does.
	for _, g := range toolfilter.Groups() {
		f, err := toolfilter.Parse([]string{g.Name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range toolfilter.Tools {
			ok, _ := f.Allows(tl.Name, s.srv.tagsOf(tl.Name))
			if want := g.Name == toolfilter.All || slices.Contains(strings.Split(g.Holds, ", "), tl.Name); ok != want {
				t.Errorf("--tools %s allows %s = %v, but the group holds %q", g.Name, tl.Name, ok, g.Holds)
			}
		}
	}
}
