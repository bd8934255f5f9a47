package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/shim"
	"github.com/spf13/pflag"
)

// mcpAbout is what flyctl mcp --help says it does; the presets and
// categories are toolfilter's catalog.
var mcpAbout = fmt.Sprintf(`Relays an MCP client's stdio stream (newline-delimited JSON-RPC) to flyd,
the per-user daemon, so every editor shares one workspace index, one set of
flutter runs and their logs. Put this command in your editor's MCP config.
stdout carries only the protocol. stderr carries only what you may have to
act on: warnings and errors (editors show it as errors); --log-level info
adds what went as it should (flyd started, a reconnect), debug more.

The session is bound to a workspace root: --workspace if given, else the
project the current directory is in (the nearest pubspec.yaml, else the top
of its git repository, else the directory itself). /, your home directory
and its ancestors are refused. The flutter processes the session starts get
this process's environment (the editor's), so CHROME_EXECUTABLE, proxies
and the like reach them; what the editor left out flyd fills from your
login environment and its own toolchain variables (JAVA_HOME, ANDROID_HOME
…), never changing what the editor passed. If no flyd answers, it starts one: the flyd user service if
'flyctl service install' installed it, else flyd in the background (the
flyd binary next to flyctl, else on PATH, or the one given with
--flyd PATH), which keeps running after the editor exits and logs to
flyd.log in the state directory. Shims starting together start one flyd.

--tools and --disable choose the tools this client sees, of flyd's own
and of the upstream servers alike (the same daemon serves other clients
their own choice). A term is a preset, a category, a tool name or a glob:

%s
A call to a tool left out is refused with the reason. flyd refuses a term
that names nothing it knows.

If flyd restarts mid-session (a crash, an upgrade), the shim reconnects
and restores the session (initialize, subscriptions) without the editor
noticing, except that requests in flight at that moment fail with an
error saying so; they are not sent again.`, toolGroups())

type mcpOptions struct {
	workspace        string
	flyd             string
	startTimeout     time.Duration
	reconnectTimeout time.Duration
	tools            []string
	disable          []string
	logLevel         string
}

func (o *mcpOptions) flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.workspace, "workspace", "", "workspace root the session is bound to (default: the current directory)")
	fs.StringVar(&o.flyd, "flyd", "", "flyd binary to start when no daemon answers (default: flyd next to flyctl, else on PATH)")
	fs.DurationVar(&o.startTimeout, "start-timeout", shim.DefaultStartTimeout, "how long to wait for a started flyd to answer")
	fs.DurationVar(&o.reconnectTimeout, "reconnect-timeout", shim.DefaultReconnectTimeout, "how long to try to get a lost connection to flyd back (0: exit instead)")
	fs.StringSliceVar(&o.tools, "tools", nil, "only these tools: presets ("+presetNames()+"), categories, names or globs, comma-separated (default: "+toolfilter.All+")")
	fs.StringSliceVar(&o.disable, "disable", nil, "leave these tools out: names, categories or globs like dart_pub* (repeatable)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "what the shim writes to stderr, from `LEVEL` on: debug, info, warn or error")
	_ = fs.MarkHidden("flyd") // it is defined just above
}

// presetNames lists the presets a tool filter may name, for flag help:
// "all, app".
func presetNames() string {
	var names []string
	for _, g := range toolfilter.Groups() {
		if g.Preset {
			names = append(names, g.Name)
		}
	}
	return strings.Join(names, ", ")
}

// toolGroups lists the presets and categories a tool filter may name,
// with their tools, as mcpAbout shows them.
func toolGroups() string {
	var b strings.Builder
	heading := map[bool]string{true: "presets", false: "categories"}
	last := ""
	for _, g := range toolfilter.Groups() {
		h := ""
		if heading[g.Preset] != last {
			h, last = heading[g.Preset], heading[g.Preset]
		}
		line := fmt.Sprintf("  %-12s %s: ", h, g.Name)
		for i, word := range strings.Fields(g.Holds) {
			if i > 0 && len(line)+1+len(word) > 74 {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", 17)
			} else if i > 0 {
				line += " "
			}
			line += word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// cmdMCP is "flyctl mcp": it relays stdin and stdout to a flyd session
// until stdin ends or ctx is done.
func cmdMCP(ctx context.Context, c *call, o *mcpOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	if o.startTimeout <= 0 {
		return usagef("mcp: --start-timeout must be positive, got %v", o.startTimeout)
	}
	if o.reconnectTimeout < 0 {
		return usagef("mcp: --reconnect-timeout must not be negative, got %v", o.reconnectTimeout)
	}
	if _, err := toolfilter.Parse(o.tools, o.disable); err != nil {
		return usagef("mcp: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("mcp: --log-level: %q is not debug, info, warn or error", o.logLevel)
	}
	reconnect := o.reconnectTimeout
	if reconnect == 0 {
		reconnect = -1 // shim.Config: never reconnect
	}

	getenv, stdin := c.getenv, c.stdin
	root, err := workspaceRoot(o.workspace, userHome(getenv))
	if err != nil {
		return err
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	if err := paths.CheckSocketPath(p.Socket); err != nil {
		return err
	}
	flyd, err := findFlyd(o.flyd, getenv)
	if err != nil {
		return err
	}
	var argv []string
	if flyd != "" {
		argv = []string{flyd, "run"}
	}

	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	// The relay waits on two descriptors and does little between: one P
	// runs it like an event loop, and the runtime has no idle P to wake a
	// thread for on every message. (On the 2-core test machine the p50 of
	// BenchmarkShimHop is the same with two.)
	runtime.GOMAXPROCS(1)
	if f, ok := stdin.(*os.File); ok {
		var restore func()
		stdin, restore = shim.Pollable(f)
		defer restore()
	}
	relay := shim.New(shim.Config{
		Socket:           p.Socket,
		StateDir:         p.StateDir,
		Workspace:        root,
		Env:              wire.EncodeEnv(environ(getenv)),
		Tools:            o.tools,
		Disable:          o.disable,
		Start:            serviceStarter(getenv, flyd != ""),
		Flyd:             argv,
		OnVersion:        c.olderFlydNotice(),
		StartTimeout:     o.startTimeout,
		ReconnectTimeout: reconnect,
		Stdin:            stdin,
		Stdout:           c.stdout,
		Log:              log,
	})
	return relay.Run(ctx)
}

// serviceStarter returns the shim's Config.Start: start the installed
// flyd user service (see startService). When there is none and flyctl
// has no flyd binary to start either (haveFlyd), its error says what to
// do.
func serviceStarter(getenv func(string) string, haveFlyd bool) func(context.Context) error {
	return func(ctx context.Context) error {
		err := startService(ctx, getenv)
		if errors.Is(err, shim.ErrNoService) && !haveFlyd {
			return fmt.Errorf("%w, and there is no flyd binary next to flyctl or on PATH; "+
				"install flyd there, pass --flyd PATH, or start it yourself with 'flyd run'", err)
		}
		return err
	}
}

// packagedEnabled reports whether the package's flyd unit is installed
// and enabled in this user's systemd (systemctl is its path).
func packagedEnabled(ctx context.Context, systemctl string) bool {
	if _, err := os.Stat(packagedUnitFile); err != nil {
		return false
	}
	return exec.CommandContext(ctx, systemctl, "--user", "is-enabled", "--quiet", systemdName+".service").Run() == nil
}

// startService asks the service manager to start the flyd user service,
// if "flyctl service install" installed one (platformFor says where): on
// Linux a systemd user unit started with "systemctl --user start", on
// macOS a LaunchAgent started with "launchctl kickstart"; on Windows
// there is none (the Run key starts flyd at logon, and nothing starts it
// later but the shim itself). It returns
// once the service manager has answered, wrapping shim.ErrNoService when
// there is no service to start. The service serves the default paths, so
// it is not used when FLY_SOCKET or FLY_STATE_DIR point elsewhere.
func startService(ctx context.Context, getenv func(string) string) error {
	if getenv(paths.EnvSocket) != "" || getenv(paths.EnvStateDir) != "" {
		return fmt.Errorf("%w for the paths %s and %s set", shim.ErrNoService, paths.EnvSocket, paths.EnvStateDir)
	}
	p, err := platformFor(runtime.GOOS, userHome(getenv))
	if err != nil {
		return fmt.Errorf("%w: %v", shim.ErrNoService, err)
	}
	if p.runKey {
		// It starts flyd at logon only: the shim starts flyd itself.
		return fmt.Errorf("%w that can start flyd now (on Windows, %s starts it at logon only)", shim.ErrNoService, p.file)
	}
	unit, argv := p.file, p.startArgv(os.Getuid())
	bin := lookPath(argv[0], getenv)
	if _, err := os.Stat(unit); err != nil {
		// No unit of the user's own: the package's, if the user enabled it
		// (flyctl service install does, when flyd is the packaged one).
		if p.manager != "systemd" || bin == "" || !packagedEnabled(ctx, bin) {
			return fmt.Errorf("%w (no %s)", shim.ErrNoService, unit)
		}
		unit = packagedUnitFile
	}
	if bin == "" {
		return fmt.Errorf("start the flyd service %s: %s is not on PATH", unit, argv[0])
	}
	out, err := exec.CommandContext(ctx, bin, argv[1:]...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return nil
}

// userHome is the user's home directory as getenv gives it: HOME, or on
// Windows USERPROFILE (else HOME, as a Unix-like shell may set it).
func userHome(getenv func(string) string) string {
	if h := getenv(homeVar(runtime.GOOS)); h != "" {
		return h
	}
	return getenv("HOME")
}

// lookPath finds an executable named name in the absolute directories of
// PATH as getenv gives it, or returns "".
func lookPath(name string, getenv func(string) string) string {
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue // like os/exec, never run a binary found relative to the cwd
		}
		if p := filepath.Join(d, name); checkExecutable(p) == nil {
			return p
		}
	}
	return ""
}

// workspaceRoot is the root the session is bound to: dir (--workspace)
// if given, else the project the current directory is in (the nearest
// pubspec.yaml, else the top of its git repository, else the directory
// itself). It is absolute with symlinks resolved, and never /, the home
// directory or an ancestor of it.
func workspaceRoot(dir, home string) (string, error) {
	flagged := dir != ""
	if !flagged {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("find the workspace: %w (pass --workspace DIR)", err)
		}
		dir = wd
	}
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(root); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", root)
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%s does not exist", dir)
		}
		if flagged {
			return "", usagef("mcp: --workspace: %v", err)
		}
		return "", fmt.Errorf("workspace: %w", err)
	}
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = h
		}
	}
	if !flagged {
		root = paths.ProjectRoot(root, home)
	}
	if err := paths.CheckRoot(root, home); err != nil {
		return "", err
	}
	return root, nil
}

// flydExe is the name of flyd's binary: flyd, or flyd.exe on Windows.
const flydExe = "flyd" + exeSuffix

// findFlyd returns the flyd binary to start when none answers: flag if
// given (it must be an executable file), else flydExe next to flyctl's own
// binary (or its symlink target), else on PATH as getenv gives it. It
// returns "" when there is none, which turns autostart off.
func findFlyd(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		p, err := filepath.Abs(flag)
		if err == nil {
			err = checkExecutable(p)
		}
		if err != nil {
			return "", usagef("mcp: --flyd: %v", err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		dirs := []string{filepath.Dir(exe)}
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		for _, d := range dirs {
			if p := filepath.Join(d, flydExe); checkExecutable(p) == nil {
				return p, nil
			}
		}
	}
	return lookPath(flydExe, getenv), nil
}

// environ is the environment that getenv sees, as os.Environ gives it:
// the names of this process's environment, valued by getenv (which tests
// replace), so that the session's runs get the editor's whole
// environment.
func environ(getenv func(string) string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if seen[k] {
			continue
		}
		seen[k] = true
		if v := getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	for _, k := range []string{"PATH", "HOME", "FLUTTER_ROOT"} {
		if v := getenv(k); v != "" && !seen[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}
