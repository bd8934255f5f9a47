// Command flyctl is the human side of fly: it inspects and controls the
// per-user flyd daemon, and its "mcp" verb is the stdio shim that editors
// start as their MCP server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitCode maps run's error to the process exit status, printing it.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return 0
	case errors.Is(err, errNoMatch):
		return 1 // as grep: nothing matched, nothing to say
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "flyctl: %v\nRun 'flyctl --help' for usage.\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "flyctl: %v\n", err)
		return 1
	}
}

const usage = `flyctl talks to flyd, the per-user daemon that shares one workspace index,
one set of flutter runs and their logs between every MCP client.

Usage:
  flyctl <command> [flags]

Commands:
  mcp       relay an editor's MCP stdio stream to flyd (put this in the editor's MCP config)
  status    show the daemon's state
  runs      list flutter runs and builds
  stop      stop a run or build
  logs      read or follow a run's log (logs tail)
  errors    print or follow a run's framework errors, deduplicated
  apps      list the apps that run outside fly (an IDE's, a terminal's)
  screenshot save what a run's screen shows as a PNG
  grep      search the project's files from flyd's warm index
  upstream  share your other MCP servers (dart mcp-server) through flyd
  dashboard print (or --open) the address of flyd's live dashboard
  token     print or rotate the token of flyd's loopback HTTP listener
  socket    print the daemon's socket path
  config    print or write editor MCP configuration (config mcp)
  service   install and control flyd as a user service
  version   print flyctl's version

Run 'flyctl <command> --help' for a command's flags.

Examples:
  flyctl mcp --workspace ~/src/my_app
  flyctl status --json
`

// run is flyctl without the process around it, so tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "mcp":
		return runMCP(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], getenv, stdout, stderr)
	case "runs":
		return runRuns(ctx, args[1:], getenv, stdout, stderr)
	case "stop":
		return runStop(ctx, args[1:], getenv, stdout, stderr)
	case "logs":
		return runLogs(ctx, args[1:], getenv, stdout, stderr)
	case "errors":
		return runErrors(ctx, args[1:], getenv, stdout, stderr)
	case "apps":
		return runApps(ctx, args[1:], getenv, stdout, stderr)
	case "screenshot":
		return runScreenshot(ctx, args[1:], getenv, stdout, stderr)
	case "grep":
		return runGrep(ctx, args[1:], getenv, stdout, stderr)
	case "upstream", "upstreams":
		return runUpstream(ctx, args[1:], getenv, stdout, stderr)
	case "dashboard":
		return runDashboard(ctx, args[1:], getenv, stdout, stderr)
	case "token":
		return runToken(ctx, args[1:], getenv, stdout)
	case "socket":
		return runSocket(ctx, args[1:], getenv, stdout, stderr)
	case "config":
		return runConfig(ctx, args[1:], getenv, stdout, stderr)
	case "service":
		return runService(ctx, args[1:], getenv, stdout, stderr)
	case "version":
		return runVersion(ctx, args[1:], getenv, stdout)
	}
	return usagef("unknown command %q", args[0])
}
