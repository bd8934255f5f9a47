package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// errorsAbout is what flyctl errors --help says it does.
const errorsAbout = `Prints the framework errors of a flutter run (layout overflows, build and
gesture exceptions, unhandled exceptions), which flutter run --machine
never prints: one line each, deduplicated with a count, with the
error-causing widget's location, the most recently seen first. By default
those since the last hot reload or restart; --all includes older ones.
An error's text is the app's: flyd keeps its escape sequences and other
control and format characters escaped (\x1b[2J, \u202e), and flyctl
prints nothing else (flyctl logs tail --raw shows the app's output as
it came).
RUN is a run id or a unique prefix of one; the default is the newest
live flutter run of the workspace containing the current directory (or
--workspace DIR).

-f follows: after the errors so far it prints each error again as it is
seen (with its new count), until the run ends. --json prints flyd's
errors page (with -f, one page per line, NDJSON); its fields may grow
but never change meaning.`

type errorsOptions struct {
	follow    bool
	all       bool
	json      bool
	workspace string
}

func (o *errorsOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing errors as they come, until the run ends")
	fs.BoolVar(&o.all, "all", false, "include errors from before the last reload or restart")
	fs.BoolVar(&o.json, "json", false, "print flyd's errors page as JSON (NDJSON with -f)")
	fs.StringVar(&o.workspace, "workspace", "", "pick the newest live run of the workspace containing `DIR`")
}

func cmdErrors(ctx context.Context, c *call, o *errorsOptions) error {
	if len(c.args) > 1 {
		return usagef("errors takes at most one run, got %q", c.args)
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	run, err := errorsRun(ctx, lc, c.args, o.workspace)
	if err != nil {
		return err
	}
	if !o.follow {
		pg, raw, err := lc.Errors(ctx, run.RunID, o.all)
		if err != nil {
			return err
		}
		if o.json {
			return writeIndentedJSON(c.stdout, raw)
		}
		return printErrors(c.stdout, c.stderr, *pg, true)
	}
	s, err := lc.FollowErrors(ctx, run.RunID, o.all)
	if err != nil {
		return err
	}
	defer s.Close()
	for first := true; ; first = false {
		if o.json {
			line, err := s.NextRaw()
			if err != nil {
				return followEnd(ctx, run.RunID, err)
			}
			if _, err := c.stdout.Write(append(line, '\n')); err != nil {
				return err
			}
			continue
		}
		pg, err := s.Next()
		if err != nil {
			return followEnd(ctx, run.RunID, err)
		}
		if pg.Type == wire.LogLineEnd {
			fmt.Fprintf(c.stderr, "flyctl: run %s ended (%s)\n", run.RunID, pg.State)
			return nil
		}
		if err := printErrors(c.stdout, c.stderr, pg, first); err != nil {
			return err
		}
	}
}

// errorsRun is the run flyctl errors reads: the one args names, else the
// newest live flutter run of the workspace containing workspace (or the
// current directory).
func errorsRun(ctx context.Context, lc *localclient.Client, args []string, workspace string) (runInfo, error) {
	if len(args) == 1 {
		return resolveRun(ctx, lc, args[0])
	}
	dir := currentDir()
	if workspace != "" {
		dir = workspace
	}
	l, err := lc.Runs(ctx)
	if err != nil {
		return runInfo{}, err
	}
	for _, r := range l.Runs { // newest first
		if r.Kind == "run" && r.Live() && inWorkspace(r.Root, dir) {
			return r, nil
		}
	}
	return runInfo{}, fmt.Errorf("no live flutter run in %s: name one (flyctl runs --all lists them)", dir)
}

// followEnd is how a follow of a run's errors ends when its stream does:
// quietly at its end or when flyctl is interrupted.
func followEnd(ctx context.Context, runID string, err error) error {
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("the errors of run %s stopped: %w", runID, err)
}

// printErrors prints a page's errors, one line each, escaped (flyd sends
// them so; a flyd of another version may not); the first page of a run
// without any says so on stderr.
func printErrors(stdout, stderr io.Writer, pg wire.ErrorsPage, first bool) error {
	if len(pg.Errors) == 0 && first {
		what := "no errors"
		if pg.Generation > 0 {
			what += " since the last reload (" + strconv.Itoa(pg.Total) + " in all; --all shows them)"
		}
		fmt.Fprintf(stderr, "flyctl: run %s: %s\n", pg.RunID, what)
		return nil
	}
	for _, e := range pg.Errors {
		if _, err := fmt.Fprintln(stdout, safetext.Line(e.Line)); err != nil {
			return err
		}
	}
	if pg.Dropped > 0 && first {
		fmt.Fprintf(stderr, "flyctl: %d older distinct errors are no longer kept\n", pg.Dropped)
	}
	return nil
}
