package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
)

// stopAbout is what flyctl stop --help says it does.
const stopAbout = `Stops a flutter run, build or tool the way the flutter_stop tool does:
app.stop, then SIGTERM to its process group, then SIGKILL, each after a
grace period. RUN is a run id or a unique prefix of one (see flyctl runs).
Prints the run's final state; stopping a run that has already ended just
prints how it ended. --json prints flyd's run record instead.

Exits 1 when there is no such run or flyd is not running.`

type stopOptions struct{ json bool }

func (o *stopOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the stopped run's record as JSON")
}

func cmdStop(ctx context.Context, c *call, o *stopOptions) error {
	switch len(c.args) {
	case 0:
		return usagef("stop needs the RUN to stop (flyctl runs lists them)")
	case 1:
	default:
		return usagef("stop takes one RUN, got %q", c.args)
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	ri, err := resolveRun(ctx, lc, c.args[0])
	if err != nil {
		return err
	}
	wasLive := ri.Live()
	stopped, raw, err := lc.Stop(ctx, ri.RunID)
	if err != nil {
		return fmt.Errorf("stop run %s: %w", ri.RunID, err)
	}
	if o.json {
		return writeIndentedJSON(c.stdout, raw)
	}
	note := ""
	if !wasLive {
		note = " (it had already ended)"
	}
	_, err = fmt.Fprintf(c.stdout, "run %s: %s%s\n", stopped.RunID, outcome(shownState(stopped.State, stopped.Crashed), stopped.ExitCode, stopped.Error), note)
	return err
}
