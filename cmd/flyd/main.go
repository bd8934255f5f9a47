// Command flyd is fly's per-user daemon: one process that every MCP client
// of the user shares, through the "flyctl mcp" shim or WebSocket.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/loginenv"
	"github.com/fly-dev/fly/daemon/loopback"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/daemon/dtd"
	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/spf13/pflag"
)

func main() {
	// A run's holder is flyd's own binary, started by flyd: it needs
	// none of the daemon, so it is dispatched before anything else.
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		os.Exit(holder.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

type usageError struct{ error }

func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "flyd: %v\nRun 'flyd --help' for usage.\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "flyd: %v\n", err)
		return 1
	}
}

const usage = `flyd is fly's per-user daemon. Every MCP client of this user shares it:
one workspace index per project, kept current, served over a local socket
(a Unix socket; a named pipe on Windows).

Usage:
  flyd run [flags]    run in the foreground, logging to stderr
  flyd version        print the version
  flyd hold           (flyd starts it) hold one run, so that it outlives flyd

Environment:
` + envUsage + `
Examples:
  flyd run
  flyd run --log-level debug --log-format json
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command given")}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, versionLine())
		return nil
	case "run":
		return runDaemon(ctx, args[1:], getenv, stderr)
	}
	return usageError{fmt.Errorf("unknown command %q", args[0])}
}

func runDaemon(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyd run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	d := daemon.DefaultConfig()
	maxMsgMB := fs.Int("max-message-mb", int(d.MaxMessageBytes>>20), "largest MCP message a client may send, in MiB")
	maxReadMB := fs.Int("max-read-mb", int(d.MaxReadBytes>>20), "largest file part one resources/read returns, in MiB")
	pageSize := fs.Int("page-size", d.PageSize, "resources per resources/list page")
	linger := fs.Duration("linger", d.Linger, "how long a workspace stays indexed after its last session")
	httpIdle := fs.Duration("http-session-idle", d.HTTPSessionIdle, "how long an MCP session over HTTP lives with no request in flight (a 2026-07-28 client's ends only so)")
	grepCacheMB := fs.Int64("grep-cache-mb", d.GrepCacheBytes>>20, "file contents kept in memory for files_grep, all workspaces together, in MiB; 0 for none (nothing is read ahead either). The default is a 128th of this machine's memory, at most 64")
	readAhead := fs.Bool("grep-read-ahead", true, "once a workspace has been searched, read the rest of its files into the grep cache while nothing searches (false: it keeps only what searches read)")
	extraExt := fs.StringSlice("allow-ext", nil, "more file extensions to serve, e.g. --allow-ext .proto,.sql")
	flutter := fs.String("flutter", "", "the flutter executable (default: flutter on each client's PATH)")
	maxRuns := fs.Int("max-runs", d.MaxRuns, "live apps per workspace: flutter runs and attached apps together")
	maxBuilds := fs.Int("max-builds", d.MaxBuilds, "concurrent builds per workspace")
	buildTimeout := fs.Duration("build-timeout", d.BuildTimeout, "how long a build may take")
	stopGrace := fs.Duration("stop-grace", d.StopGrace, "wait after app.stop and after SIGTERM before the next signal")
	ringEntries := fs.Int("log-entries", d.RingEntries, "log lines kept in memory per run")
	ringKB := fs.Int("log-kb", d.RingBytes>>10, "log text kept in memory per run, in KiB")
	keepRuns := fs.Int("keep-runs", d.KeepRuns, "finished runs kept on disk")
	holdRuns := fs.Bool("hold-runs", true, "keep each flutter run in a holder process, so that it outlives a restart, crash or upgrade of flyd (false: runs end with flyd)")
	storedLines := fs.Int("stored-log-lines", 100_000, "log lines kept on disk per run")
	storedMB := fs.Int("stored-log-mb", 32, "log text kept on disk per run, in MiB")
	maxRunAge := fs.Duration("max-run-age", d.MaxRunAge, "finished runs older than this are deleted")
	listen := fs.String("listen", loopback.DefaultListen, "loopback `ADDR` for HTTP MCP clients and the dashboard, guarded by the token in the state directory; \"\" for none")
	dtdDir := fs.String("dtd-dir", "", "the `DIR` where Dart Tooling Daemons write their files, watched to find apps started outside fly (default: $DART_DATA_HOME/dtd, else Dart's state directory; - for none)")
	upstreams := fs.String("upstreams", "", "the file of shared upstream MCP servers (default: upstreams.json in the config directory; - for none)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	loginEnv := fs.Bool("login-env", true, "fill what a client leaves out of a run's environment from your login shell's (Windows: your user environment)")
	loginShell := fs.String("login-shell", "", "the `SHELL` whose login environment fills runs' (default: your login shell from the user database, never $SHELL)")
	noConsole := fs.Bool("no-console", false, "log to flyd.log in the state directory, not stderr; on Windows also close the console window that a start at logon opens (flyctl service install runs flyd so)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flyd run [flags]\n\nRuns flyd in the foreground; logs go to stderr (with --no-console, to flyd.log).\n\nFlags:\n%s\nExamples:\n  flyd run\n  FLY_SOCKET=/tmp/fly-test.sock flyd run --log-level debug\n  flyd run --no-console\n", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *listen != "" {
		if err := loopback.CheckListen(*listen); err != nil {
			return usageError{err}
		}
	}
	if *maxMsgMB < 1 || *maxReadMB < 1 {
		return usageError{errors.New("--max-message-mb and --max-read-mb must be at least 1")}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	if *logFormat != "text" && *logFormat != "json" {
		return usageError{fmt.Errorf("--log-format must be text or json, not %q", *logFormat)}
	}
	if os.Geteuid() == 0 && getenv("SUDO_UID") != "" {
		return errors.New("refusing to run under sudo: flyd is a per-user daemon and would leave root-owned files in your state directory; run it as yourself")
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	logw := stderr
	if *noConsole {
		f, err := noConsoleLog(p)
		if err != nil {
			return err
		}
		// Not closed: it is flyd's stderr until it exits, main's
		// last words included.
		logw = f
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(logw, opts)
	if *logFormat == "json" {
		h = slog.NewJSONHandler(logw, opts)
	}
	rules := index.DefaultRules()
	for _, e := range *extraExt {
		rules.Extensions = append(rules.Extensions, "."+strings.ToLower(strings.TrimPrefix(e, ".")))
	}
	home, _ := os.UserHomeDir()
	holderExe := ""
	if *holdRuns {
		exe, err := os.Executable()
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			return fmt.Errorf("--hold-runs: find flyd's own binary for the runs' holders: %w (or pass --hold-runs=false)", err)
		}
		holderExe = exe
	}
	if *storedLines < 1 || *storedMB < 1 {
		return usageError{errors.New("--stored-log-lines and --stored-log-mb must be at least 1")}
	}
	srv := daemon.New(daemon.Config{
		Paths:            p,
		Home:             home,
		MaxMessageBytes:  int64(*maxMsgMB) << 20,
		MaxReadBytes:     int64(*maxReadMB) << 20,
		PageSize:         *pageSize,
		Linger:           *linger,
		HTTPSessionIdle:  *httpIdle,
		Rules:            rules,
		GrepCacheBytes:   grepCacheBytes(*grepCacheMB),
		NoGrepReadAhead:  !*readAhead,
		Flutter:          *flutter,
		MaxRuns:          *maxRuns,
		MaxBuilds:        *maxBuilds,
		BuildTimeout:     *buildTimeout,
		StopGrace:        *stopGrace,
		RingEntries:      *ringEntries,
		RingBytes:        *ringKB << 10,
		KeepRuns:         *keepRuns,
		MaxRunAge:        *maxRunAge,
		Upstreams:        *upstreams,
		DTDDir:           dtdDirOf(*dtdDir),
		Listen:           *listen,
		Subreaper:        true, // flyd is the process: its runs' orphans come back to it
		HolderExe:        holderExe,
		StoredLogEntries: *storedLines,
		StoredLogBytes:   int64(*storedMB) << 20,
		LoginEnv:         loginEnvOf(*loginEnv, *loginShell, getenv, slog.New(h)),
		Log:              slog.New(h),
	})
	return srv.Run(ctx)
}

// grepCacheBytes is --grep-cache-mb as daemon.Config takes it: 0 (none)
// is negative there, where 0 means the default.
func grepCacheBytes(mb int64) int64 {
	if mb <= 0 {
		return -1
	}
	return mb << 20
}

// noConsoleLog is --no-console: it opens flyd.log in the state directory
// (made private if need be) for appending, as a flyd the shim starts
// writes it, for flyd's logger, and leaves the console (detachConsole: on
// Windows the log then stands in for stderr too, a panic's trace
// included).
func noConsoleLog(p paths.Paths) (*os.File, error) {
	if err := owner.MkdirPrivate(p.StateDir); err != nil {
		return nil, fmt.Errorf("--no-console: %w", err)
	}
	f, err := os.OpenFile(p.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--no-console: %w", err)
	}
	if err := detachConsole(f); err != nil {
		fmt.Fprintf(f, "flyd: --no-console: %v\n", err)
	}
	return f, nil
}

// dtdDirOf is --dtd-dir's directory: the default one when empty, none
// for "-".
func dtdDirOf(flag string) string {
	switch flag {
	case "":
		return dtd.Dir(os.Getenv)
	case "-":
		return ""
	}
	return flag
}

// loginEnvOf is the user's login environment, read once, at the first run
// that needs it (a login shell costs tens of milliseconds); nil when
// turned off. When it cannot be read, it is empty, and why is logged once.
func loginEnvOf(on bool, shell string, getenv func(string) string, log *slog.Logger) func() (map[string]string, string) {
	if !on {
		return nil
	}
	return sync.OnceValues(func() (map[string]string, string) {
		env, err := loginenv.Read(context.Background(), shell, getenv)
		if err != nil {
			log.Warn("runs get the client's environment and flyd's toolchain variables only", logkey.Error, err)
			return nil, ""
		}
		log.Info("login environment read", "source", env.Source, "vars", len(env.Vars))
		return env.Vars, env.Source
	})
}
