package mcpserver

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseWorkspaceURI(t *testing.T) {
	ok := []struct {
		uri, rel      string
		start, length int64
		hasLength     bool
	}{
		{"workspace:///lib/main.dart", "lib/main.dart", 0, 0, false},
		{"workspace:///pubspec.yaml?start=3&length=10", "pubspec.yaml", 3, 10, true},
		{"workspace:///lib/my%20page.dart", "lib/my page.dart", 0, 0, false},
		{"workspace:///l%C3%A9/x.dart", "lé/x.dart", 0, 0, false},
		{"workspace:///a..b/x.dart", "a..b/x.dart", 0, 0, false},
		{"workspace:///.github/ci.yaml", ".github/ci.yaml", 0, 0, false},
	}
	for _, c := range ok {
		rel, r, err := parseWorkspaceURI(c.uri)
		if err != nil || rel != c.rel || r.start != c.start || r.length != c.length || r.hasLength != c.hasLength {
			t.Errorf("parseWorkspaceURI(%q) = %q, %+v, %v; want %q", c.uri, rel, r, err, c.rel)
		}
	}
	bad := []string{
		"", "workspace:", "workspace:lib/main.dart", "workspace://", "workspace:///",
		"workspace:///..", "workspace:///../x", "workspace:///a/../../x", "workspace:///a/./b",
		"workspace:///%2e%2e/x", "workspace:///a%2Fb", "workspace:///a%5cb", "workspace:///a%00b",
		"workspace:///a\x00b", "workspace:////etc/passwd", "workspace:///a//b", "workspace:///a/",
		"workspace://h/a", "workspace://user@/a", "workspace:///a#frag", "workspace:///a\\b",
		"workspace:///a?start=x", "workspace:///a?start=1&start=2", "workspace:///a?foo=1",
		"workspace:///a?length=-5", "file:///etc/passwd", "workspace:///%ff", strings.Repeat("workspace:///a", 1000),
	}
	for _, uri := range bad {
		if rel, _, err := parseWorkspaceURI(uri); err == nil {
			t.Errorf("parseWorkspaceURI(%q) = %q, want an error", uri, rel)
		}
	}
}

func TestWorkspaceURIRoundTrip(t *testing.T) {
	for _, rel := range []string{"lib/main.dart", "my page.dart", "a#b.dart", "q?.dart", "lé.dart", "100%.md"} {
		got, _, err := parseWorkspaceURI(workspaceURI(rel))
		if err != nil || got != rel {
			t.Errorf("parseWorkspaceURI(workspaceURI(%q)) = %q, %v", rel, got, err)
		}
	}
}

// FuzzParseWorkspaceURI: whatever the URI, an accepted path is local to
// the root and names the same file when turned back into a URI.
func FuzzParseWorkspaceURI(f *testing.F) {
	for _, s := range []string{"workspace:///lib/main.dart", "workspace:///a?start=1&length=2", "workspace:///../x",
		"workspace:///%2e%2e/x", "workspace:///a%20b", "workspace:////x", "workspace:///a\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		rel, r, err := parseWorkspaceURI(uri)
		if err != nil {
			return
		}
		if !filepath.IsLocal(rel) || strings.Contains(rel, `\`) || strings.HasPrefix(rel, "/") {
			t.Fatalf("parseWorkspaceURI(%q) accepted non-local path %q", uri, rel)
		}
		for _, el := range strings.Split(rel, "/") {
			if el == ".." || el == "." || el == "" {
				t.Fatalf("parseWorkspaceURI(%q) accepted %q with element %q", uri, rel, el)
			}
		}
		root := "/w/root"
		if j := filepath.Join(root, rel); !strings.HasPrefix(j, root+"/") {
			t.Fatalf("parseWorkspaceURI(%q) = %q, joins to %q outside %q", uri, rel, j, root)
		}
		if r.start < 0 || r.length < 0 {
			t.Fatalf("parseWorkspaceURI(%q) negative range %+v", uri, r)
		}
		if back, _, err := parseWorkspaceURI(workspaceURI(rel)); err != nil || back != rel {
			t.Fatalf("round trip of %q: %q, %v", rel, back, err)
		}
	})
}
