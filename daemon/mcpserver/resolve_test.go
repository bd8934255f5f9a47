package mcpserver

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/index"
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
		// What Windows reads as a drive, a stream, a device or another name.
		"workspace:///C:/x", "workspace:///c:x", "workspace:///main.dart:x", "workspace:///main.dart%3Ax",
		"workspace:///lib/con.dart", "workspace:///NUL", "workspace:///lib/COM1.txt", "workspace:///lib/main.dart.",
		"workspace:///lib%20/x.dart", "workspace:///DOCKER~1/config.json", "workspace://///server/share/x",
		"workspace:///lib%5Cmain.dart", "workspace:///lib\\main.dart",
	}
	for _, uri := range bad {
		if rel, _, err := parseWorkspaceURI(uri); err == nil {
			t.Errorf("parseWorkspaceURI(%q) = %q, want an error", uri, rel)
		}
	}
}

func TestCheckRelPath(t *testing.T) {
	ok := []struct{ in, rel string }{
		{"lib/main.dart", "lib/main.dart"},
		{"a..b/x.dart", "a..b/x.dart"},
		{".github/ci.yaml", ".github/ci.yaml"},
		{"lib/console.dart", "lib/console.dart"},
		{"my page.dart", "my page.dart"},
		{"q?.dart", "q?.dart"},
		{"lé/x.dart", "lé/x.dart"},
	}
	for _, c := range ok {
		if rel, err := checkRelPath("/" + c.in); err != nil || rel != c.rel {
			t.Errorf("checkRelPath(/%s) = %q, %v; want %q", c.in, rel, err, c.rel)
		}
	}
	bad := []struct{ in, why string }{
		{"", "no file path"},
		{"/etc/passwd", "absolute"},
		{"lib/../x", "may not leave"},
		{"Lib/../.SSH", "may not leave"},
		{"a//b", "empty element"},
		{"C:foo", "drive"},
		{"C:/x", "drive"},
		{`c:\x`, "drive"},
		{`\\?\C:\x`, "UNC or device"},
		{`\\.\COM1`, "UNC or device"},
		{`\\server\share\x.dart`, "UNC or device"},
		{"//server/share/x.dart", "UNC or device"},
		{"lib/main.dart:stream", "alternate data stream"},
		{"lib/main.dart::$DATA", "alternate data stream"},
		{"CON", "device"},
		{"lib/nul.dart", "device"},
		{"lib/Com1.txt", "device"},
		{"lib/con .dart", "device"},
		{"LPT9/x.dart", "device"},
		{"lib/main.dart.", "dot or a space"},
		{"lib./x.dart", "dot or a space"},
		{"lib/x.dart ", "dot or a space"},
		{"DOCKER~1/config.json", "short name"},
		{"a\x00b", "NUL"},
	}
	for _, c := range bad {
		rel, err := checkRelPath("/" + c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("checkRelPath(/%s) = %q, %v; want an error saying %q", c.in, rel, err, c.why)
		}
	}

	// A backslash separates on Windows; elsewhere it is part of a name,
	// and the refusal says to use '/'.
	for _, in := range []string{`lib\main.dart`, `lib/src\a.dart`} {
		rel, err := checkRelPath("/" + in)
		if filepath.Separator == '\\' {
			if want := strings.ReplaceAll(in, `\`, "/"); err != nil || rel != want {
				t.Errorf("checkRelPath(/%s) = %q, %v; want %q", in, rel, err, want)
			}
		} else if err == nil || !strings.Contains(err.Error(), "with '/'") {
			t.Errorf("checkRelPath(/%s) = %q, %v; want an error saying to use '/'", in, rel, err)
		}
	}
	for _, in := range []string{`lib\..\.ssh\id.pem`, `lib\con.dart`, `\lib\main.dart`} {
		if rel, err := checkRelPath("/" + in); err == nil {
			t.Errorf("checkRelPath(/%s) = %q, want an error", in, rel)
		}
	}
}

// FuzzCheckRelPath: whatever an agent gives, an accepted path is clean,
// slash-separated, local to the root on Windows as on Unix, and has no
// element that Windows reads as another file or a device.
func FuzzCheckRelPath(f *testing.F) {
	for _, s := range []string{"lib/main.dart", `lib\main.dart`, "C:x", `\\?\C:\x`, "lib/con.dart", "a:b", "x. ", "KEY~1.PRO", "../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rel, err := checkRelPath("/" + in)
		if err != nil {
			return
		}
		if strings.ContainsAny(rel, `\:`) || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel || !filepath.IsLocal(filepath.FromSlash(rel)) {
			t.Fatalf("checkRelPath(/%q) accepted %q", in, rel)
		}
		for _, el := range strings.Split(rel, "/") {
			if el == "" || el == "." || el == ".." || index.NameRefusal(el) != "" {
				t.Fatalf("checkRelPath(/%q) accepted %q with element %q", in, rel, el)
			}
		}
		if want := filepath.ToSlash(in); rel != want {
			t.Fatalf("checkRelPath(/%q) = %q, want %q (only separators change)", in, rel, want)
		}
	})
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
		if !filepath.IsLocal(rel) || strings.ContainsAny(rel, `\:`) || strings.HasPrefix(rel, "/") {
			t.Fatalf("parseWorkspaceURI(%q) accepted non-local path %q", uri, rel)
		}
		for _, el := range strings.Split(rel, "/") {
			if el == ".." || el == "." || el == "" || index.NameRefusal(el) != "" {
				t.Fatalf("parseWorkspaceURI(%q) accepted %q with element %q", uri, rel, el)
			}
		}
		root := filepath.FromSlash("/w/root")
		if j := filepath.Join(root, rel); !strings.HasPrefix(j, root+string(filepath.Separator)) {
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
