package fakeflutter

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	t.Chdir(t.TempDir())
	os.WriteFile("pubspec.yaml", []byte("name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n"), 0o644)
	tests := []struct {
		args     []string
		built    string // the ✓ line
		artifact string // a file or directory that must exist
		status   string // the timed line
	}{
		{[]string{"apk"}, "✓ Built build/app/outputs/flutter-apk/app-release.apk (40.1MB)",
			"build/app/outputs/flutter-apk/app-release.apk", "Running Gradle task 'assembleRelease'..."},
		{[]string{"apk", "--debug"}, "✓ Built build/app/outputs/flutter-apk/app-debug.apk",
			"build/app/outputs/flutter-apk/app-debug.apk", "Running Gradle task 'assembleDebug'..."},
		{[]string{"apk", "--flavor", "dev"}, "✓ Built build/app/outputs/flutter-apk/app-dev-release.apk (40.1MB)",
			"build/app/outputs/flutter-apk/app-dev-release.apk", "Running Gradle task 'assembleDevRelease'..."},
		{[]string{"appbundle"}, "✓ Built build/app/outputs/bundle/release/app-release.aab (20.5MB)",
			"build/app/outputs/bundle/release/app-release.aab", "Running Gradle task 'bundleRelease'..."},
		{[]string{"web"}, "✓ Built build/web", "build/web/index.html", "Compiling lib/main.dart for the Web..."},
		{[]string{"linux", "--profile"}, "✓ Built build/linux/x64/profile/bundle", "build/linux/x64/profile/bundle/demo",
			"Building Linux application..."},
		{[]string{"windows"}, "✓ Built build/windows/x64/runner/Release", "build/windows/x64/runner/Release/demo.exe",
			"Building Windows application..."},
		{[]string{"macos"}, "✓ Built build/macos/Build/Products/Release/demo.app (41.6MB)",
			"build/macos/Build/Products/Release/demo.app/Contents/MacOS/demo", "Building macOS application..."},
		{[]string{"ios"}, "✓ Built build/ios/iphoneos/Runner.app (18.9MB)", "build/ios/iphoneos/Runner.app/Info.plist",
			"Running Xcode build..."},
		{[]string{"ipa"}, "✓ Built IPA to build/ios/ipa (25.4MB)", "build/ios/ipa/demo.ipa", "Running Xcode build..."},
		{[]string{"aar"}, "✓ Built build/host/outputs/repo",
			"build/host/outputs/repo/com/example/demo/flutter_release/1.0/flutter_release-1.0.aar",
			"Running Gradle task 'assembleAarRelease'..."},
		{[]string{"ios-framework"}, "Frameworks written to build/ios/framework.",
			"build/ios/framework/Release/Flutter.xcframework/Info.plist", " ├─Building App.xcframework..."},
	}
	for i, tt := range tests {
		stdout, stderr, code := mustMain(t, nil, append([]string{"build"}, tt.args...)...)
		lines := strings.Split(stdout, "\n")
		if code != 0 || stderr != "" {
			t.Errorf("build %v = %d, stderr %q", tt.args, code, stderr)
		}
		if index(lines, func(l string) bool { return l == tt.built }) < 0 {
			t.Errorf("build %v printed:\n%s\nwant line %q", tt.args, stdout, tt.built)
		}
		timed := regexp.MustCompile(`^` + regexp.QuoteMeta(tt.status) + ` +\d+\.\ds$`)
		if index(lines, timed.MatchString) < 0 {
			t.Errorf("build %v: no timed status line %q in:\n%s", tt.args, tt.status, stdout)
		}
		if _, err := os.Stat(tt.artifact); err != nil {
			t.Errorf("build %v: artifact: %v", tt.args, err)
		}
		if got := strings.Contains(stdout, "Resolving dependencies...\n"); got != (i == 0) {
			t.Errorf("build %v: printed pub get = %v, want only on the first build", tt.args, got)
		}
	}
	// The status line pads to a fixed column, as flutter does.
	stdout, _, _ := mustMain(t, nil, "build", "apk")
	if !strings.Contains(stdout, "Running Gradle task 'assembleRelease'...                      16.8s\n") {
		t.Errorf("apk status line not aligned:\n%s", stdout)
	}
	if !strings.Contains(stdout, `Font asset "MaterialIcons-Regular.otf" was tree-shaken`) {
		t.Errorf("release build without the tree-shaking line:\n%s", stdout)
	}
}

func TestBuildFail(t *testing.T) {
	t.Chdir(t.TempDir())
	tests := []struct {
		platform string
		tail     []string
		artifact string
	}{
		{"apk", []string{"FAILURE: Build failed with an exception.", "BUILD FAILED in 2m 8s",
			"Gradle task assembleRelease failed with exit code 1"}, "build/app/outputs/flutter-apk/app-release.apk"},
		{"appbundle", []string{"FAILURE: Build failed with an exception.", "Gradle task bundleRelease failed with exit code 1"},
			"build/app/outputs/bundle"},
		{"web", []string{"Target dart2js failed: ", "Error: Failed to compile application for the Web."}, "build/web"},
		{"linux", []string{"Build process failed"}, "build/linux"},
		{"ios", []string{"Error (Xcode): lib/main.dart:12:3: Error: Expected ';' after this.",
			"Encountered error while building for device."}, "build/ios/iphoneos"},
	}
	for _, tt := range tests {
		stdout, stderr, code := mustMain(t, map[string]string{EnvBuildFail: "1"}, "build", tt.platform)
		if code != 1 {
			t.Errorf("build %s = %d, want 1", tt.platform, code)
		}
		for _, want := range tt.tail {
			if !strings.Contains(stderr, want) {
				t.Errorf("build %s stderr lacks %q:\n%s", tt.platform, want, stderr)
			}
		}
		if strings.Contains(stdout, "✓ Built") {
			t.Errorf("build %s failed but printed:\n%s", tt.platform, stdout)
		}
		if _, err := os.Stat(tt.artifact); err == nil {
			t.Errorf("build %s failed but left %s", tt.platform, tt.artifact)
		}
	}
	_, stderr, _ := mustMain(t, map[string]string{EnvBuildFail: "1"}, "build", "apk")
	if !strings.HasSuffix(stderr, "BUILD FAILED in 2m 8s\nGradle task assembleRelease failed with exit code 1\n") {
		t.Errorf("apk failure tail:\n%s", stderr)
	}
}
