package fakeflutter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreate(t *testing.T) {
	t.Chdir(t.TempDir())
	stdout, stderr, code := mustMain(t, nil, "create", "my_app", "--org", "com.acme")
	if code != 0 || stderr != "" {
		t.Fatalf("create = %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"Creating project my_app...\n", "\nAll done!\n", "Your application code is in my_app/lib/main.dart.\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("create output lacks %q:\n%s", want, stdout)
		}
	}
	pubspec, err := os.ReadFile("my_app/pubspec.yaml")
	if err != nil || !strings.HasPrefix(string(pubspec), "name: my_app\n") ||
		!strings.Contains(string(pubspec), "dependencies:\n  flutter:\n    sdk: flutter\n") {
		t.Errorf("pubspec.yaml = %q (%v)", pubspec, err)
	}
	for _, dir := range []string{"lib", "test", "android", "ios", "web", "linux", "macos", "windows"} {
		entries, err := os.ReadDir(filepath.Join("my_app", dir))
		if err != nil || len(entries) == 0 {
			t.Errorf("%s/: %v, %d entries", dir, err, len(entries))
		}
	}
	if b, _ := os.ReadFile("my_app/android/app/build.gradle"); !strings.Contains(string(b), `"com.acme.my_app"`) {
		t.Errorf("build.gradle = %s", b)
	}
	if b, _ := os.ReadFile("my_app/.metadata"); !strings.Contains(string(b), "project_type: app\n") {
		t.Errorf(".metadata = %s", b)
	}

	// Again: nothing is overwritten.
	os.WriteFile("my_app/lib/main.dart", []byte("// mine\n"), 0o644)
	stdout, _, code = mustMain(t, nil, "create", "my_app")
	if b, _ := os.ReadFile("my_app/lib/main.dart"); code != 0 || string(b) != "// mine\n" ||
		!strings.Contains(stdout, "Recreating project my_app...\n") || !strings.Contains(stdout, "Wrote 0 files.\n") {
		t.Errorf("recreate = %d, main.dart %q:\n%s", code, b, stdout)
	}

	// --project-name, --platforms.
	if _, _, code := mustMain(t, nil, "create", "Some-Dir", "--project-name", "pkg", "--platforms", "web"); code != 0 {
		t.Errorf("create --project-name = %d", code)
	}
	if _, err := os.Stat("Some-Dir/android"); err == nil {
		t.Errorf("--platforms web created android/")
	}
	if b, _ := os.ReadFile("Some-Dir/pubspec.yaml"); !strings.HasPrefix(string(b), "name: pkg\n") {
		t.Errorf("pubspec = %s", b)
	}

	_, stderr, code = mustMain(t, nil, "create", "My-App")
	if code != 1 || !strings.HasPrefix(stderr, `"My-App" is not a valid Dart package name.`) {
		t.Errorf("create My-App = %d, %q", code, stderr)
	}
}
