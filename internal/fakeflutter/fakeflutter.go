// Package fakeflutter is a fake `flutter` command for tests. It speaks the
// `flutter run --machine` protocol (daemon protocol 0.6.1: events,
// app.restart, app.stop, the daemon's error strings), prints realistic
// `flutter build <platform>` output and creates the artifact it names, and
// answers `devices --machine`, `doctor`, `create` and `--version`.
//
// It is a library, not a binary: a test binary re-executes itself as
// `flutter`. Install links the running test binary into a directory as an
// executable named flutter; the caller puts that directory first on PATH
// and sets FLY_TEST_HELPER=flutter, and its TestMain then calls Main
// instead of running the tests:
//
//	func TestMain(m *testing.M) {
//		if os.Getenv("FLY_TEST_HELPER") == "flutter" {
//			os.Exit(fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
//		}
//		os.Exit(m.Run())
//	}
//
// Tests steer the fake with the Env* variables below (build failure, a
// crash mid-run, log load, ignoring SIGTERM, a grandchild process, a
// mismatched app id, a startup delay).
//
// It owns no toolchain, devices or network. It reads its steering
// variables only through the getenv it is given, and writes files only
// under the working directory (build artifacts, the project that create
// makes).
package fakeflutter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment variables that steer the fake. Booleans accept what
// strconv.ParseBool accepts; an empty value means unset. A malformed value
// makes every command fail with exit code 2 and the reason on stderr.
const (
	// EnvBuildFail makes `build` print the platform's failure tail (Gradle,
	// dart2js, Xcode, CMake) to stderr and exit 1, and makes `run --machine`
	// fail to compile at start as flutter_tools does: after app.start and
	// the build's app.progress, the compile error on stderr
	// ("lib/main.dart:12:3: Error: Expected ';' after this." and the
	// source lines under it), then app.stop {appId, error, trace} with the
	// ToolExit's flutter_tools stack, and exit 1.
	EnvBuildFail = "FAKE_FLUTTER_BUILD_FAIL"

	// EnvReloadFail makes app.restart print a compile error to stderr and
	// answer {"code":1,"message":"Try again after fixing the above error(s)."}.
	EnvReloadFail = "FAKE_FLUTTER_RELOAD_FAIL"

	// EnvReloadReject makes the VM reject every hot reload (not a hot
	// restart), as it does a change reload cannot apply: stderr says
	// "Hot reload was rejected:" and why, and app.restart answers
	// {"code":1,"message":"Reload rejected: <why>"} (run_hot.dart).
	EnvReloadReject = "FAKE_FLUTTER_RELOAD_REJECT"

	// EnvCrashAfter (an integer N >= 0) makes `run --machine` crash after
	// app.started and N app.log lines: it prints an error app.log event
	// and "Lost connection to device." and exits with CrashExitCode,
	// without app.stop. With N above the number of lines the run will
	// print (see EnvLines, EnvTickMS) it never crashes.
	EnvCrashAfter = "FAKE_FLUTTER_CRASH_AFTER"

	// EnvTickMS is the interval, in milliseconds, of the app.log lines
	// ("flutter: tick N") printed after app.started. The default is 200;
	// 0 means the app prints nothing.
	EnvTickMS = "FAKE_FLUTTER_TICK_MS"

	// EnvLinesPerSec overrides EnvTickMS with a rate in lines per second.
	// 0 means as fast as possible (a flood, buffered and flushed every few
	// hundred lines); combine it with EnvLines for a bounded burst, which
	// (without EnvStamp or EnvCrashAfter) is made first and written in one
	// go, so that making lines costs nothing while they are read.
	EnvLinesPerSec = "FAKE_FLUTTER_LINES_PER_SEC"

	// EnvLines bounds the app.log lines to N in total; after them the app
	// stays idle (still answering requests) until it is stopped. Unset
	// means no bound.
	EnvLines = "FAKE_FLUTTER_LINES"

	// EnvStamp appends " at=<unix nanoseconds>" to each app.log line, the
	// time it was printed, and to the summary of each Flutter.Error, the
	// time it was posted, so a benchmark can measure delivery latency.
	EnvStamp = "FAKE_FLUTTER_STAMP"

	// EnvIgnoreSIGTERM makes `run` and `build` ignore SIGTERM, so only
	// SIGKILL stops them.
	EnvIgnoreSIGTERM = "FAKE_FLUTTER_IGNORE_SIGTERM"

	// EnvGrandchild makes `run` and `build` start a child that sleeps
	// 1000 s (the fake itself, as grandchildCommand) in their own process
	// group and print "grandchild pid N" as a plain stdout
	// line (for run, right after daemon.connected). "1" (or any true
	// value) gives the grandchild /dev/null for its output; "inherit"
	// hands it the fake's stdout and stderr, so the pipes stay open until
	// the grandchild dies too.
	EnvGrandchild = "FAKE_FLUTTER_GRANDCHILD"

	// EnvAppID fixes the appId that `run --machine` reports in app.start
	// (default: a random UUID v4).
	EnvAppID = "FAKE_FLUTTER_APP_ID"

	// EnvWrongAppID makes `run --machine` accept a different appId from
	// the one it reports, so every app.restart, app.stop and
	// app.callServiceExtension for the reported id fails with
	// "app '<id>' not found".
	EnvWrongAppID = "FAKE_FLUTTER_WRONG_APP_ID"

	// EnvStartupMS adds a delay, in milliseconds, to the build phase: in
	// `run --machine` between the build's app.progress start and finish
	// (so before app.started), and in `build` before the timed status
	// line completes. Tests use it to cancel during a build.
	EnvStartupMS = "FAKE_FLUTTER_STARTUP_MS"

	// EnvNoDevices makes `devices --machine` print [] and `run` fail with
	// "No supported devices connected.".
	EnvNoDevices = "FAKE_FLUTTER_NO_DEVICES"

	// EnvPrintEnv names variables (comma-separated) that `run` prints,
	// right after app.started, as app.log lines "flutter: env NAME=value"
	// ("<unset>" when unset): tests see which environment a run got.
	EnvPrintEnv = "FAKE_FLUTTER_PRINT_ENV"

	// EnvErrorsAtStart names framework errors (comma-separated: overflow,
	// nullcheck, build) the app throws right after app.started, and
	// EnvErrorsOnReload those it throws after every hot reload or
	// restart. In debug mode each is a Flutter.Error event on the VM
	// service's Extension stream, as the framework posts it, and nothing
	// is printed (flutter run --machine prints no framework error text);
	// on a web device it is the text block in an app.log event instead.
	EnvErrorsAtStart  = "FAKE_FLUTTER_ERRORS_AT_START"
	EnvErrorsOnReload = "FAKE_FLUTTER_ERRORS_ON_RELOAD"
	// EnvErrorEveryMS makes the app throw the first error of
	// EnvErrorsAtStart (else an overflow) every N ms.
	EnvErrorEveryMS = "FAKE_FLUTTER_ERROR_EVERY_MS"

	// EnvWidgets is the number of items in the list of the app's home
	// page (default 12): each is an ItemTile of the project holding a
	// ListTile, a Text and an Icon, so the widget tree grows with it
	// (about 2,000 widgets at 75 items in the full tree).
	EnvWidgets = "FAKE_FLUTTER_WIDGETS"
	// EnvNoScreenshot makes _flutter.screenshot fail as it does on
	// backends that cannot capture the last layer tree.
	EnvNoScreenshot = "FAKE_FLUTTER_NO_SCREENSHOT"
	// EnvDTD makes a debug run start a Dart Tooling Daemon, as recent
	// flutter versions and IDEs do: app.dtd names it, it lists the app's
	// VM service (ConnectedApp), and with DART_DATA_HOME set it writes
	// its file into $DART_DATA_HOME/dtd (ideName from DASH__IDE_NAME),
	// which it removes when the app ends.
	EnvDTD = "FAKE_FLUTTER_DTD"
	// EnvInspectorDelayMS makes a debug app register the widget
	// inspector's extensions N ms after it starts (ServiceExtensionAdded
	// on the Isolate stream), as a slow first frame does.
	EnvInspectorDelayMS = "FAKE_FLUTTER_INSPECTOR_DELAY_MS"
)

// Exit codes, as the real tool uses them.
const (
	ExitFailure = 1  // a ToolExit: build failure, bad project name, no device
	ExitUsage   = 64 // an unknown command, subcommand or missing argument
	// CrashExitCode is the exit code of a run that crashes (EnvCrashAfter).
	CrashExitCode = 255
	// killedExitCode is what an in-process run returns when its test kills
	// it (see mainKillable), as a shell reports SIGKILL.
	killedExitCode = 137
)

// Version facts the fake reports.
const (
	ProtocolVersion  = "0.6.1"
	FlutterVersion   = "3.24.3"
	DartVersion      = "3.5.3"
	frameworkRev     = "2663184aa79047d0a33a14a3b607954f8fdd8730"
	engineRev        = "36335019a8eab588c3c2ea783c618d90505be233"
	devToolsVersion  = "2.37.3"
	usageHint        = "Run 'flutter -h' (or 'flutter <command> -h') for available flutter commands and options."
	defaultTarget    = "lib/main.dart"
	defaultTick      = 200 * time.Millisecond
	defaultBuildTime = 40 * time.Millisecond
)

// config is the steering read from the environment.
type config struct {
	buildFail      bool
	reloadFail     bool
	reject         bool
	kill           <-chan struct{} // in-process tests only: see mainKillable
	widgets        int
	noScreenshot   bool
	dtd            bool
	inspectorDelay time.Duration
	ignoreTerm     bool
	wrongAppID     bool
	noDevices      bool
	stamp          bool
	grandchild     string        // "", "null" or "inherit"
	crashAfter     int           // -1: never
	lines          int           // -1: unbounded
	interval       time.Duration // between log lines; 0 is a flood
	quiet          bool          // no log lines at all
	startup        time.Duration // added to the build phase
	appID          string

	errorsAtStart  []string      // error kinds thrown after app.started
	errorsOnReload []string      // error kinds thrown after each reload or restart
	errorEvery     time.Duration // 0: never
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{crashAfter: -1, lines: -1, interval: defaultTick}
	var errs []error
	boolean := func(name string) bool {
		v := getenv(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a boolean", name, v))
		}
		return b
	}
	count := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer", name, v))
			return def
		}
		return n
	}
	c.buildFail = boolean(EnvBuildFail)
	c.reloadFail = boolean(EnvReloadFail)
	c.reject = boolean(EnvReloadReject)
	c.ignoreTerm = boolean(EnvIgnoreSIGTERM)
	c.wrongAppID = boolean(EnvWrongAppID)
	c.noDevices = boolean(EnvNoDevices)
	c.stamp = boolean(EnvStamp)
	switch v := getenv(EnvGrandchild); v {
	case "":
	case "inherit":
		c.grandchild = "inherit"
	default:
		if boolean(EnvGrandchild) {
			c.grandchild = "null"
		}
	}
	c.crashAfter = count(EnvCrashAfter, -1)
	c.lines = count(EnvLines, -1)
	if ms := count(EnvTickMS, -1); ms == 0 {
		c.quiet = true
	} else if ms > 0 {
		c.interval = time.Duration(ms) * time.Millisecond
	}
	if rate := count(EnvLinesPerSec, -1); rate == 0 {
		c.quiet, c.interval = false, 0
	} else if rate > 0 {
		c.quiet, c.interval = false, time.Second/time.Duration(rate)
	}
	c.startup = time.Duration(count(EnvStartupMS, 0)) * time.Millisecond
	c.appID = getenv(EnvAppID)
	kinds := func(name string) []string {
		var out []string
		for _, k := range strings.Split(getenv(name), ",") {
			switch k = strings.TrimSpace(k); k {
			case "":
			case ErrorOverflow, ErrorNullCheck, ErrorBuild:
				out = append(out, k)
			default:
				errs = append(errs, fmt.Errorf("%s: error kind %q is not overflow, nullcheck or build", name, k))
			}
		}
		return out
	}
	c.errorsAtStart, c.errorsOnReload = kinds(EnvErrorsAtStart), kinds(EnvErrorsOnReload)
	c.errorEvery = time.Duration(count(EnvErrorEveryMS, 0)) * time.Millisecond
	c.widgets = count(EnvWidgets, 12)
	c.noScreenshot = boolean(EnvNoScreenshot)
	c.dtd = boolean(EnvDTD)
	c.inspectorDelay = time.Duration(count(EnvInspectorDelayMS, 0)) * time.Millisecond
	return c, errors.Join(errs...)
}

// Main runs the fake flutter with args (without argv[0]) and returns the
// exit code. It blocks until the command is done; for `run --machine`
// that is when the app is stopped (app.stop, app.detach,
// daemon.shutdown) or crashes. stdout and stderr may be the same writer.
//
// Main consumes stdin: when it returns it interrupts a read still in
// progress (a read deadline on an *os.File that supports one, Close on
// any other io.Closer) and waits for its reader goroutine. Only when the
// read cannot be interrupted (a blocking os.Stdin) does it return without
// waiting, since the process is about to exit.
//
// EnvIgnoreSIGTERM and EnvGrandchild act on the whole process, so they
// belong in a re-executed helper process, not in-process tests.
func Main(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	return mainKillable(nil, args, getenv, stdin, stdout, stderr)
}

// mainKillable is Main for an in-process test: closing kill ends a run at
// once, as SIGKILL ends the process (neither stdin EOF nor
// daemon.shutdown stops an app, as in the real tool).
func mainKillable(kill <-chan struct{}, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fake flutter: %v\n", err)
		return 2
	}
	cfg.kill = kill
	// Global options come before the command.
	i := 0
	machine := false
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		switch args[i] {
		case "--machine":
			machine = true
		case "-h", "--help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	if i == len(args) {
		if slices.Contains(args, "--version") {
			return version(stdout, machine)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, rest := args[i], args[i+1:]
	if slices.Contains(rest, "-h") || slices.Contains(rest, "--help") {
		fmt.Fprintf(stdout, "Usage: flutter %s [arguments]\n\n%s\n", cmd, usageHint)
		return 0
	}
	switch cmd {
	case "run":
		return run(cfg, rest, stdin, stdout, stderr)
	case "attach":
		return attach(cfg, rest, stdin, stdout, stderr)
	case "build":
		return build(cfg, rest, stdout, stderr)
	case "devices":
		return devices(cfg, rest, stdout)
	case "doctor":
		return doctor(stdout)
	case "create":
		return create(rest, stdout, stderr)
	case grandchildCommand:
		time.Sleep(1000 * time.Second)
		return 0
	}
	fmt.Fprintf(stderr, "Could not find a command named %q.\n\n%s\n", cmd, usageHint)
	return ExitUsage
}

const usage = `Manage your Flutter app development.

Common commands:

  flutter create <output directory>
    Create a new Flutter project in the specified directory.

  flutter run [options]
    Run your Flutter application on an attached device or in an emulator.

Usage: flutter <command> [arguments]

Available commands (this fake implements): build, create, devices, doctor, run.
`

// Install makes the running executable (a test binary) available as the
// flutter command in dir and returns its path: on Unix dir/flutter, a
// symlink or a copy where links are refused; on Windows dir/flutter.bat,
// which runs a copy of it, as the real SDK's flutter.bat runs the Dart VM.
// The caller puts dir first on PATH, sets FLY_TEST_HELPER=flutter for the
// child, and has its TestMain call Main (see the package comment).
func Install(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("install fake flutter: %w", err)
	}
	return install(self, dir)
}

// copyFile copies src to dst, a new executable file.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install fake flutter: %w", err)
	}
	defer in.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("install fake flutter: %w", err)
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return fmt.Errorf("install fake flutter: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("install fake flutter: %w", err)
	}
	return nil
}

func version(stdout io.Writer, machine bool) int {
	if machine {
		b, _ := json.MarshalIndent(map[string]string{
			"frameworkVersion":    FlutterVersion,
			"channel":             "stable",
			"repositoryUrl":       "https://github.com/flutter/flutter.git",
			"frameworkRevision":   frameworkRev,
			"frameworkCommitDate": "2024-09-11 16:27:48 -0500",
			"engineRevision":      engineRev,
			"dartSdkVersion":      DartVersion,
			"devToolsVersion":     devToolsVersion,
			"flutterVersion":      FlutterVersion,
		}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "Flutter %s • channel stable • https://github.com/flutter/flutter.git\n", FlutterVersion)
	fmt.Fprintf(stdout, "Framework • revision %s (4 weeks ago) • 2024-09-11 16:27:48 -0500\n", frameworkRev[:10])
	fmt.Fprintf(stdout, "Engine • revision %s\n", engineRev[:10])
	fmt.Fprintf(stdout, "Tools • Dart %s • DevTools %s\n", DartVersion, devToolsVersion)
	return 0
}

func doctor(stdout io.Writer) int {
	fmt.Fprint(stdout, `Doctor summary (to see all details, run flutter doctor -v):
[✓] Flutter (Channel stable, `+FlutterVersion+`, on Ubuntu 24.04.1 LTS 6.8.0-45-generic, locale en_US.UTF-8)
[✓] Android toolchain - develop for Android devices (Android SDK version 34.0.0)
[✓] Chrome - develop for the web
[✓] Linux toolchain - develop for Linux desktop
[✓] Android Studio (version 2024.1)
[✓] Connected device (3 available)
[✓] Network resources

• No issues found!
`)
	return 0
}

// device is one entry of `flutter devices --machine`.
type device struct {
	Name           string       `json:"name"`
	ID             string       `json:"id"`
	IsSupported    bool         `json:"isSupported"`
	TargetPlatform string       `json:"targetPlatform"`
	Emulator       bool         `json:"emulator"`
	SDK            string       `json:"sdk"`
	Capabilities   capabilities `json:"capabilities"`

	category string // mobile, desktop, web
	hidden   bool   // not listed, but accepted by run -d
}

type capabilities struct {
	HotReload         bool `json:"hotReload"`
	HotRestart        bool `json:"hotRestart"`
	Screenshot        bool `json:"screenshot"`
	FastStart         bool `json:"fastStart"`
	FlutterExit       bool `json:"flutterExit"`
	HardwareRendering bool `json:"hardwareRendering"`
	StartPaused       bool `json:"startPaused"`
}

var knownDevices = []device{
	{
		Name: "sdk gphone64 x86 64", ID: "emulator-5554", IsSupported: true, TargetPlatform: "android-x64",
		Emulator: true, SDK: "Android 14 (API 34)", category: "mobile",
		Capabilities: capabilities{true, true, true, true, true, true, true},
	},
	{
		Name: "Linux", ID: "linux", IsSupported: true, TargetPlatform: "linux-x64",
		SDK: "Ubuntu 24.04.1 LTS 6.8.0-45-generic", category: "desktop",
		Capabilities: capabilities{HotReload: true, HotRestart: true, FlutterExit: true, StartPaused: true},
	},
	{
		Name: "Chrome", ID: "chrome", IsSupported: true, TargetPlatform: "web-javascript",
		SDK: "Google Chrome 129.0.6668.89", category: "web",
		Capabilities: capabilities{HotReload: true, HotRestart: true, StartPaused: true},
	},
	{
		Name: "Web Server", ID: "web-server", IsSupported: true, TargetPlatform: "web-javascript",
		SDK: "Flutter Tools", category: "web", hidden: true,
		Capabilities: capabilities{HotReload: true, HotRestart: true, StartPaused: true},
	},
}

func listedDevices(cfg config) []device {
	if cfg.noDevices {
		return []device{}
	}
	var ds []device
	for _, d := range knownDevices {
		if !d.hidden {
			ds = append(ds, d)
		}
	}
	return ds
}

// findDevice resolves run's -d the way flutter does: an exact id first,
// then a case-insensitive prefix of an id or a name. An empty id picks
// the first device.
func findDevice(cfg config, id string) (device, bool) {
	if cfg.noDevices {
		return device{}, false
	}
	if id == "" {
		return knownDevices[0], true
	}
	for _, d := range knownDevices {
		if d.ID == id {
			return d, true
		}
	}
	l := strings.ToLower(id)
	for _, d := range knownDevices {
		if strings.HasPrefix(strings.ToLower(d.ID), l) || strings.HasPrefix(strings.ToLower(d.Name), l) {
			return d, true
		}
	}
	return device{}, false
}

func devices(cfg config, args []string, stdout io.Writer) int {
	ds := listedDevices(cfg)
	if slices.Contains(args, "--machine") {
		b, _ := json.MarshalIndent(ds, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	if len(ds) == 0 {
		fmt.Fprintln(stdout, "No devices detected.")
		return 0
	}
	fmt.Fprintf(stdout, "Found %d connected devices:\n", len(ds))
	var w [3]int
	cols := make([][4]string, len(ds))
	for i, d := range ds {
		sdk := d.SDK
		if d.Emulator {
			sdk += " (emulator)"
		}
		cols[i] = [4]string{d.Name + " (" + d.category + ")", d.ID, d.TargetPlatform, sdk}
		for j := range w {
			w[j] = max(w[j], len([]rune(cols[i][j])))
		}
	}
	for _, c := range cols {
		fmt.Fprintf(stdout, "  %s • %s • %s • %s\n", pad(c[0], w[0]), pad(c[1], w[1]), pad(c[2], w[2]), c[3])
	}
	return 0
}

// grandchildCommand is the fake's own command (no flutter has it) that
// sleeps for 1000 s: the grandchild EnvGrandchild starts, on every OS.
const grandchildCommand = "fake-grandchild"

// startEffects applies the process-wide steering for run and build: it
// starts the grandchild (before ignoring SIGTERM, so the grandchild keeps
// the default disposition) and returns its pid, or 0.
func startEffects(cfg config, stdout, stderr io.Writer) (int, error) {
	pid := 0
	if cfg.grandchild != "" {
		self, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("start grandchild: %w", err)
		}
		c := exec.Command(self, grandchildCommand) // the environment that made this the fake makes that one too
		if cfg.grandchild == "inherit" {
			c.Stdout, c.Stderr = stdout, stderr
		}
		if err := c.Start(); err != nil {
			return 0, fmt.Errorf("start grandchild: %w", err)
		}
		pid = c.Process.Pid
		// The grandchild is never waited for: it must outlive this process
		// unless its process group is killed, which is what tests check.
		c.Process.Release()
	}
	if cfg.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	// The Dart VM ignores SIGPIPE: a flutter whose stdout's reader is gone
	// gets write errors, and runs on deaf (see serve).
	ignoreSIGPIPE()
	return pid, nil
}

// flags is a parsed command line: options by canonical name, in order,
// and the positional arguments.
type flags struct {
	opts map[string][]string
	args []string
}

func (f flags) has(name string) bool { _, ok := f.opts[name]; return ok }

func (f flags) last(name, def string) string {
	if v := f.opts[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// parseFlags splits args into options and positional arguments. valued
// maps every spelling of an option that takes a value ("-d",
// "--device-id") to its canonical name; other options are boolean and
// kept under their own spelling. Options flutter does not know are
// accepted: flyd passes allowlisted extras that the fake need not model.
func parseFlags(args []string, valued map[string]string) (flags, error) {
	f := flags{opts: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			f.args = append(f.args, args[i+1:]...)
			return f, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			if canon, ok := valued[name]; ok {
				if !hasVal {
					if i+1 >= len(args) {
						//lint:ignore ST1005 flutter's own text
						return f, fmt.Errorf("Option %s requires an argument.", name)
					}
					i++
					val = args[i]
				}
				f.opts[canon] = append(f.opts[canon], val)
				continue
			}
			f.opts[name] = append(f.opts[name], val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			name := a[:2]
			canon, ok := valued[name]
			if !ok {
				f.opts[a] = append(f.opts[a], "")
				continue
			}
			val := a[2:]
			if val == "" {
				if i+1 >= len(args) {
					//lint:ignore ST1005 flutter's own text
					return f, fmt.Errorf("Option %s requires an argument.", name)
				}
				i++
				val = args[i]
			}
			f.opts[canon] = append(f.opts[canon], val)
		default:
			f.args = append(f.args, a)
		}
	}
	return f, nil
}

// mode is the build mode from --debug, --profile or --release (the last
// one wins), or def.
func mode(f flags, def string) string {
	m := def
	for _, name := range []string{"debug", "profile", "release"} {
		if f.has("--" + name) {
			m = name
		}
	}
	return m
}

// projectName is the name in ./pubspec.yaml, else the directory's name.
func projectName(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "pubspec.yaml"))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "name:"); ok {
				if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
					return v
				}
			}
		}
	}
	return strings.ReplaceAll(strings.ToLower(filepath.Base(dir)), "-", "_")
}

func pad(s string, w int) string {
	if n := len([]rune(s)); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
