package fakeflutter

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The `flutter build` subcommands.
var platforms = map[string]func(*builder) int{
	"apk":           (*builder).apk,
	"appbundle":     (*builder).appbundle,
	"aar":           (*builder).aar,
	"web":           (*builder).web,
	"linux":         (*builder).linux,
	"windows":       (*builder).windows,
	"macos":         (*builder).macos,
	"ios":           (*builder).ios,
	"ipa":           (*builder).ipa,
	"ios-framework": (*builder).iosFramework,
}

// builder is one `flutter build <platform>`.
type builder struct {
	cfg    config
	f      flags
	stdout io.Writer
	stderr io.Writer
	dir    string
	mode   string // debug, profile or release
	flavor string
	target string
	name   string // the project's name
}

func build(cfg config, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, map[string]string{
		"-t": "target", "--target": "target", "--flavor": "flavor",
		"--dart-define": "dart-define", "--dart-define-from-file": "dart-define-from-file",
		"--build-name": "build-name", "--build-number": "build-number", "--target-platform": "target-platform",
		"--split-debug-info": "split-debug-info", "--base-href": "base-href", "--output": "output", "-o": "output",
		"--export-options-plist": "export-options-plist", "--export-method": "export-method",
	})
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\n%s\n", err, usageHint)
		return ExitUsage
	}
	if len(f.args) == 0 {
		fmt.Fprintf(stderr, "Missing subcommand for \"flutter build\".\n\nAvailable subcommands:\n  %s\n\n%s\n",
			strings.Join(platformNames(), "\n  "), usageHint)
		return ExitUsage
	}
	sub := f.args[0]
	do, ok := platforms[sub]
	if !ok {
		fmt.Fprintf(stderr, "Could not find a subcommand named %q for \"flutter build\".\n\n%s\n", sub, usageHint)
		return ExitUsage
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "fake flutter: %v\n", err)
		return ExitFailure
	}
	b := &builder{
		cfg: cfg, f: f, stdout: stdout, stderr: stderr, dir: dir,
		mode:   mode(f, "release"),
		flavor: f.last("flavor", ""),
		target: f.last("target", defaultTarget),
		name:   projectName(dir),
	}
	pid, err := startEffects(cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fake flutter: %v\n", err)
		return ExitFailure
	}
	if pid != 0 {
		fmt.Fprintf(stdout, "grandchild pid %d\n", pid)
	}
	if err := b.pubGet(); err != nil {
		return b.fatal(err)
	}
	return do(b)
}

func platformNames() []string {
	var names []string
	for name := range platforms {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// pubGet prints what `pub get` prints when the package config is missing,
// and writes one.
func (b *builder) pubGet() error {
	cfg := filepath.Join(b.dir, ".dart_tool", "package_config.json")
	if _, err := os.Stat(cfg); err == nil {
		return nil
	}
	fmt.Fprintln(b.stdout, "Resolving dependencies...")
	fmt.Fprintln(b.stdout, "Downloading packages...")
	fmt.Fprintln(b.stdout, "Got dependencies!")
	return b.file(".dart_tool/package_config.json", `{"configVersion":2,"packages":[],"generator":"pub"}`+"\n")
}

// status prints msg, takes the build's time, then prints took on the same
// line, as flutter's status lines do when stdout is not a terminal: the
// line is incomplete while the step runs.
func (b *builder) status(msg, took string) {
	fmt.Fprint(b.stdout, pad(msg, 59))
	time.Sleep(defaultBuildTime + b.cfg.startup)
	fmt.Fprintf(b.stdout, "%8s\n", took)
}

func (b *builder) treeShaken() {
	if b.mode != "debug" {
		fmt.Fprintln(b.stdout, `Font asset "MaterialIcons-Regular.otf" was tree-shaken, reducing it from 1645184 to 1464 bytes (99.9% reduction). Tree-shaking can be disabled by providing the --no-tree-shake-icons flag when building your app.`)
	}
}

// file writes content to rel under the project, making its directories.
func (b *builder) file(rel, content string) error {
	path := filepath.Join(b.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o755)
}

func (b *builder) files(rels ...string) int {
	for _, rel := range rels {
		if err := b.file(rel, "fake "+filepath.Base(rel)+"\n"); err != nil {
			return b.fatal(err)
		}
	}
	return 0
}

func (b *builder) fatal(err error) int {
	fmt.Fprintf(b.stderr, "%v\n", err)
	return ExitFailure
}

func (b *builder) fail(tail string) int {
	fmt.Fprint(b.stderr, tail)
	return ExitFailure
}

func (b *builder) size(s string) string {
	if b.mode == "debug" {
		return ""
	}
	return " (" + s + ")"
}

func (b *builder) gradleFailure(task string) string {
	return compileError(b.target) + `
FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':app:compileFlutterBuild` + title(b.flavor) + title(b.mode) + `'.
> Process 'command 'flutter'' finished with non-zero exit value 1

* Try:
> Run with --stacktrace option to get the stack trace.
> Run with --info or --debug option to get more log output.
> Run with --scan to get full insights.
> Get more help at https://help.gradle.org.

BUILD FAILED in 2m 8s
Gradle task ` + task + ` failed with exit code 1
`
}

func (b *builder) apk() int {
	task := "assemble" + title(b.flavor) + title(b.mode)
	apk := "build/app/outputs/flutter-apk/app-" + b.mode + ".apk"
	if b.flavor != "" {
		apk = "build/app/outputs/flutter-apk/app-" + b.flavor + "-" + b.mode + ".apk"
	}
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Running Gradle task '"+task+"'...", "128.0s")
		return b.fail(b.gradleFailure(task))
	}
	b.status("Running Gradle task '"+task+"'...", "16.8s")
	if code := b.files(apk); code != 0 {
		return code
	}
	fmt.Fprintf(b.stdout, "✓ Built %s%s\n", apk, b.size("40.1MB"))
	return 0
}

func (b *builder) appbundle() int {
	task := "bundle" + title(b.flavor) + title(b.mode)
	variant, name := b.mode, "app-"+b.mode+".aab"
	if b.flavor != "" {
		variant, name = b.flavor+title(b.mode), "app-"+b.flavor+"-"+b.mode+".aab"
	}
	aab := "build/app/outputs/bundle/" + variant + "/" + name
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Running Gradle task '"+task+"'...", "97.3s")
		return b.fail(b.gradleFailure(task))
	}
	b.status("Running Gradle task '"+task+"'...", "21.4s")
	if code := b.files(aab); code != 0 {
		return code
	}
	fmt.Fprintf(b.stdout, "✓ Built %s%s\n", aab, b.size("20.5MB"))
	return 0
}

// aar builds every mode not turned off with --no-<mode>, as flutter does.
func (b *builder) aar() int {
	for _, m := range []string{"debug", "profile", "release"} {
		if b.f.has("--no-" + m) {
			continue
		}
		task := "assembleAar" + title(m)
		if b.cfg.buildFail {
			b.status("Running Gradle task '"+task+"'...", "64.2s")
			b.mode = m
			return b.fail(b.gradleFailure(task))
		}
		b.status("Running Gradle task '"+task+"'...", "12.7s")
		pkg := "build/host/outputs/repo/com/example/" + b.name + "/flutter_" + m + "/1.0/flutter_" + m + "-1.0"
		if code := b.files(pkg+".aar", pkg+".pom"); code != 0 {
			return code
		}
	}
	fmt.Fprintln(b.stdout, "✓ Built build/host/outputs/repo")
	fmt.Fprintln(b.stdout, "\nConsuming the Module\n  1. Open <host>/app/build.gradle\n  2. Ensure you have the repositories configured, otherwise add them:")
	return 0
}

func (b *builder) web() int {
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Compiling "+b.target+" for the Web...", "3.1s")
		return b.fail("Target dart2js failed: ProcessException: Process exited abnormally with exit code 1:\n" +
			b.target + ":12:3:\nError: Expected ';' after this.\n  runApp(const MyApp())\n  ^\n" +
			"Error: Compilation failed.\n  Command: dart compile js --no-source-maps -o build/web/main.dart.js " + b.target + "\n" +
			"Error: Failed to compile application for the Web.\n")
	}
	b.status("Compiling "+b.target+" for the Web...", "22.8s")
	if code := b.files("build/web/index.html", "build/web/main.dart.js", "build/web/flutter_bootstrap.js",
		"build/web/assets/AssetManifest.bin"); code != 0 {
		return code
	}
	fmt.Fprintln(b.stdout, "✓ Built build/web")
	return 0
}

// desktop builds a CMake-based desktop bundle (linux, windows).
func (b *builder) desktop(what, took, dir string, files ...string) int {
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Building "+what+" application...", "9.4s")
		return b.fail(compileError(b.target) + "Target kernel_snapshot_program failed: Exception\nBuild process failed\n")
	}
	b.status("Building "+what+" application...", took)
	files = append(files, "data/flutter_assets/AssetManifest.bin", "data/icudtl.dat")
	for _, f := range files {
		if code := b.files(dir + "/" + f); code != 0 {
			return code
		}
	}
	fmt.Fprintf(b.stdout, "✓ Built %s\n", dir)
	return 0
}

func (b *builder) linux() int {
	return b.desktop("Linux", "25.2s", "build/linux/x64/"+b.mode+"/bundle", b.name, "lib/libapp.so")
}

func (b *builder) windows() int {
	return b.desktop("Windows", "31.5s", "build/windows/x64/runner/"+title(b.mode), b.name+".exe")
}

func (b *builder) xcodeFailure(what string) int {
	return b.fail("Error (Xcode): " + strings.TrimSuffix(compileError(b.target), "\n") + "\n\n" +
		"Encountered error while building for " + what + ".\n")
}

func (b *builder) macos() int {
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Building macOS application...", "12.0s")
		return b.xcodeFailure("macOS")
	}
	b.status("Building macOS application...", "38.9s")
	app := "build/macos/Build/Products/" + title(b.mode) + "/" + b.name + ".app"
	if code := b.files(app+"/Contents/MacOS/"+b.name, app+"/Contents/Info.plist"); code != 0 {
		return code
	}
	fmt.Fprintf(b.stdout, "✓ Built %s%s\n", app, b.size("41.6MB"))
	return 0
}

func (b *builder) ios() int {
	fmt.Fprintf(b.stdout, "Building com.example.%s for device (ios-%s)...\n", b.name, b.mode)
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Running Xcode build...", "14.2s")
		return b.xcodeFailure("device")
	}
	b.status("Running Xcode build...", "45.3s")
	app := "build/ios/iphoneos/Runner.app"
	if code := b.files(app+"/Runner", app+"/Info.plist"); code != 0 {
		return code
	}
	fmt.Fprintf(b.stdout, "✓ Built %s%s\n", app, b.size("18.9MB"))
	return 0
}

func (b *builder) ipa() int {
	fmt.Fprintf(b.stdout, "Archiving com.example.%s...\n", b.name)
	b.treeShaken()
	if b.cfg.buildFail {
		b.status("Running Xcode build...", "14.2s")
		return b.xcodeFailure("device")
	}
	b.status("Running Xcode build...", "52.1s")
	fmt.Fprintln(b.stdout, "Xcode archive done.")
	ipa := "build/ios/ipa/" + b.name + ".ipa"
	if code := b.files("build/ios/archive/Runner.xcarchive/Info.plist", ipa); code != 0 {
		return code
	}
	fmt.Fprintln(b.stdout, "✓ Built build/ios/archive/Runner.xcarchive (132.1MB)")
	fmt.Fprintln(b.stdout, "Building App Store IPA...")
	fmt.Fprintln(b.stdout, "✓ Built IPA to build/ios/ipa (25.4MB)")
	return 0
}

func (b *builder) iosFramework() int {
	for _, m := range []string{"debug", "profile", "release"} {
		if b.f.has("--no-" + m) {
			continue
		}
		fmt.Fprintf(b.stdout, "Building frameworks for com.example.%s in %s mode...\n", b.name, m)
		if b.cfg.buildFail {
			b.status(" ├─Building App.xcframework...", "4.0s")
			return b.xcodeFailure("device")
		}
		b.status(" ├─Building App.xcframework...", "20.7s")
		dir := "build/ios/framework/" + title(m)
		if code := b.files(dir+"/App.xcframework/Info.plist", dir+"/Flutter.xcframework/Info.plist"); code != 0 {
			return code
		}
	}
	fmt.Fprintln(b.stdout, "Frameworks written to build/ios/framework.")
	return 0
}
