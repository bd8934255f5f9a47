package localapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/store"
)

func TestPubspecName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"name: demo\n", "demo"},
		{"\ufeffname: my_app\r\ndescription: x\r\n", "my_app"},
		{"# a comment\nname:   demo   # the app\n", "demo"},
		{"name: 'quoted'\n", "quoted"},
		{`name: "dq"` + "\n", "dq"},
		{"description: no name\n", ""},
		{"  name: nested\nname: top\n", "top"},
		{"dependencies:\n  name: x\n", ""},
		{"name: two words\n", ""},
		{"name: 1digit\n", ""},
		{"name: a#b\n", ""},
		{"name: <script>\n", ""},
		{"name: \x1b[2Jclear\n", ""},
		{"name: " + strings.Repeat("a", 65) + "\n", ""},
		{"name:\n", ""},
		{"", ""},
	} {
		if got := pubspecName([]byte(tc.in)); got != tc.want {
			t.Errorf("pubspecName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzPubspecName: whatever a pubspec.yaml holds, the name found is ""
// or a Dart identifier no longer than maxNameLength.
func FuzzPubspecName(f *testing.F) {
	f.Add([]byte("name: demo\n"))
	f.Add([]byte("\ufeffname: 'a_b' # c\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := pubspecName(b); got != "" && !packageName(got) {
			t.Errorf("pubspecName(%q) = %q, not a package name", b, got)
		}
	})
}

// TestProjectName: the name is read from a regular file only, and from
// its first pubspecPeek bytes.
func TestProjectName(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		root := filepath.Join(dir, name)
		flytest.WriteTree(t, root, map[string]string{"pubspec.yaml": content})
		return root
	}
	demo := write("demo", "name: demo\n")
	late := write("late", strings.Repeat("# padding\n", pubspecPeek/10)+"name: late\n")
	for _, tc := range []struct{ root, want string }{
		{demo, "demo"},
		{late, ""},
		{filepath.Join(dir, "none"), ""},
		{"relative", ""},
		{"", ""},
	} {
		if got := projectName(tc.root); got != tc.want {
			t.Errorf("projectName(%q) = %q, want %q", tc.root, got, tc.want)
		}
	}
	if got := projectNames([]string{demo, demo, late}); len(got) != 1 || got[demo] != "demo" {
		t.Errorf("projectNames = %v, want only %s", got, demo)
	}
	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(dir, "fifo")
		os.Mkdir(fifo, 0o755)
		flytest.Mkfifo(t, filepath.Join(fifo, "pubspec.yaml"))
		if got := projectName(fifo); got != "" { // not opened: it would wait for a writer
			t.Errorf("projectName(a FIFO) = %q, want none", got)
		}
	})
}

// TestFavicon: /favicon.ico, which browsers ask for by themselves, is
// the dashboard's icon, and public; only that exact path.
func TestFavicon(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	resp := a.do(t, "GET", "/favicon.ico")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("GET /favicon.ico = %s %q, want 200 and an SVG", resp.Status, resp.Header.Get("Content-Type"))
	}
	for path, want := range map[string]bool{"/favicon.ico": true, "/favicon.ico/x": false, "/favicon.icox": false, "/v1/status": false} {
		if got := Public(path); got != want {
			t.Errorf("Public(%q) = %v, want %v", path, got, want)
		}
	}
}
