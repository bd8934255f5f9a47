package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
)

// TestGrep searches a project through a real flyd, as a person would.
func TestGrep(t *testing.T) {
	e := flytest.NewEnv(t)
	// Made before flyd starts, so that flyd stops before it is removed: on
	// Windows a folder flyd serves cannot be removed (docs/windows.md).
	root := t.TempDir()
	flytest.StartFlyd(t, e)
	for p, c := range map[string]string{
		"pubspec.yaml":       "name: app\n",
		"lib/main.dart":      "void main() {\n  runApp(const App());\n}\n",
		"lib/src/app.dart":   "class App {}\n// runApp is called in main\n",
		"build/gen.dart":     "runApp(x)\n",
		"test/app_test.dart": "// RUNAPP in a test\n",
	} {
		full := filepath.Join(root, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(c), 0o644)
	}
	out := mustFlyctl(t, e.Getenv, "grep", "--workspace", root, "runApp")
	want := "lib/main.dart:2:  runApp(const App());\nlib/src/app.dart:2:// runApp is called in main\n"
	if out != want {
		t.Errorf("flyctl grep runApp =\n%s\nwant\n%s", out, want)
	}
	out = mustFlyctl(t, e.Getenv, "grep", "--workspace", root, "-i", "-g", "test/**", "-C", "1", "runapp")
	if out != "test/app_test.dart:1:// RUNAPP in a test\n" {
		t.Errorf("flyctl grep -i -g test/** = %q", out)
	}
	out = mustFlyctl(t, e.Getenv, "grep", "--workspace", root, "-F", "-C", "1", "runApp(")
	if !strings.Contains(out, "lib/main.dart-1-void main() {\n") || !strings.Contains(out, "lib/main.dart-3-}\n") {
		t.Errorf("flyctl grep -C 1 = %q, want the context lines", out)
	}
	if out := mustFlyctl(t, e.Getenv, "grep", "--workspace", root, "--json", "App"); !strings.HasPrefix(out, `{"root":`) {
		t.Errorf("flyctl grep --json = %q", out)
	}
	if _, _, code := flyctl(t, e.Getenv, "grep", "--workspace", root, "nothing-matches-this"); code != 1 {
		t.Errorf("flyctl grep with no match exited %d, want 1", code)
	}
	if _, _, code := flyctl(t, e.Getenv, "grep", "--workspace", root, "("); code != 1 {
		t.Errorf("flyctl grep with a bad pattern exited %d, want 1", code)
	}
	if _, _, code := flyctl(t, e.Getenv, "grep"); code != 2 {
		t.Errorf("flyctl grep without a pattern exited %d, want 2", code)
	}
}
