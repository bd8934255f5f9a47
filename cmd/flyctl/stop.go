package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const stopUsage = `Usage:
  flyctl stop [--json] RUN

Stops a flutter run, build or tool the way the flutter_stop tool does:
app.stop, then SIGTERM to its process group, then SIGKILL, each after a
grace period. RUN is a run id or a unique prefix of one (see flyctl runs).
Prints the run's final state; stopping a run that has already ended just
prints how it ended. --json prints flyd's run record instead.

Exits 1 when there is no such run or flyd is not running.

Flags:
%s
Examples:
  flyctl stop 01jq3v6xk2
  flyctl stop "$(flyctl runs --json | jq -r '.runs[0].run_id')"
`

func runStop(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl stop", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the stopped run's record as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, stopUsage, fs.FlagUsages())
			return nil
		}
		return usagef("stop: %v", err)
	}
	switch fs.NArg() {
	case 0:
		return usagef("stop needs the RUN to stop (flyctl runs lists them)")
	case 1:
	default:
		return usagef("stop takes one RUN, got %q", fs.Args())
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	ri, err := resolveRun(ctx, c, fs.Arg(0))
	if err != nil {
		return err
	}
	wasLive := ri.Live()
	var raw json.RawMessage
	if err := c.callJSON(ctx, http.MethodPost, runRoute(wire.RouteRunStop, ri.RunID), nil, &raw); err != nil {
		return fmt.Errorf("stop run %s: %w", ri.RunID, err)
	}
	if *asJSON {
		return writeIndentedJSON(stdout, raw)
	}
	if err := json.Unmarshal(raw, &ri); err != nil {
		return fmt.Errorf("read flyd's answer: %w", err)
	}
	note := ""
	if !wasLive {
		note = " (it had already ended)"
	}
	_, err = fmt.Fprintf(stdout, "run %s: %s%s\n", ri.RunID, outcome(ri.State, ri.ExitCode, ri.Error), note)
	return err
}
