// Command flyctl is the human side of fly: it inspects and controls the
// per-user flyd daemon, and its "mcp" verb is the stdio shim that editors
// start as their MCP server. Its commands are a table (commands.go) from
// which their help pages are generated (command.go); it speaks to flyd
// through internal/localclient.
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

// run is flyctl without the process around it, so tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &call{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	return dispatch(ctx, c, commands(), args)
}

// usageError marks a mistake in the command line: exit status 2. It is
// flyctl's only kind of usage error; every other error is a failure.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitCode maps run's error to the process exit status, printing it:
// 0, 2 for a usage error, 1 for a failure (whose error says what to do).
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
