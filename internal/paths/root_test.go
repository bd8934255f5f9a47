package paths

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckRoot(t *testing.T) {
	for _, tc := range []struct {
		root, home string
		ok         bool
	}{
		{"/", "/home/u", false},
		{"/home", "/home/u", false},
		{"/home/u", "/home/u", false},
		{"/home/u/", "/home/u", false},
		{"/home/u/src/app", "/home/u", true},
		{"/home/uv", "/home/u", true},
		{"/tmp/app", "/home/u", true},
		{"/tmp/app", "", true},
		{"/", "", false},
	} {
		err := CheckRoot(tc.root, tc.home)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadRoot)) {
			t.Errorf("CheckRoot(%q, %q) = %v, want ok %v", tc.root, tc.home, err, tc.ok)
		}
	}
}

func TestProjectRoot(t *testing.T) {
	home := t.TempDir()
	mk := func(p string) string {
		full := filepath.Join(home, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if filepath.Base(full) == ".git" {
			os.Mkdir(full, 0o755)
		} else {
			os.WriteFile(full, nil, 0o644)
		}
		return full
	}
	mk("pubspec.yaml") // in home itself: never a candidate
	mk("src/app/pubspec.yaml")
	mk("src/app/lib/src/x.dart")
	mk("src/mono/.git")
	mk("src/mono/packages/a/pubspec.yaml")
	mk("src/mono/tools/bin/x.sh")
	mk("src/loose/notes.txt")
	for _, tc := range []struct{ dir, want string }{
		{"src/app/lib/src", "src/app"},
		{"src/app", "src/app"},
		{"src/mono/packages/a", "src/mono/packages/a"},
		{"src/mono/tools/bin", "src/mono"},
		{"src/loose", "src/loose"},
	} {
		dir := filepath.Join(home, filepath.FromSlash(tc.dir))
		if got, want := ProjectRoot(dir, home), filepath.Join(home, filepath.FromSlash(tc.want)); got != want {
			t.Errorf("ProjectRoot(%s) = %s, want %s", tc.dir, got, want)
		}
	}
	if got := ProjectRoot(home, home); got != home {
		t.Errorf("ProjectRoot(home) = %s, want home itself (for CheckRoot to refuse)", got)
	}
}
