package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const errorsUsage = `Usage:
  flyctl errors [RUN] [-f] [--all] [--json]

Prints the framework errors of a flutter run (layout overflows, build and
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
but never change meaning.

Flags:
%s
Examples:
  flyctl errors
  flyctl errors -f
  flyctl errors 01j9 --json | jq -r '.errors[].location'
`

func runErrors(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl errors", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	follow := fs.BoolP("follow", "f", false, "keep printing errors as they come, until the run ends")
	all := fs.Bool("all", false, "include errors from before the last reload or restart")
	asJSON := fs.Bool("json", false, "print flyd's errors page as JSON (NDJSON with -f)")
	workspace := fs.String("workspace", "", "pick the newest live run of the workspace containing `DIR`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, errorsUsage, fs.FlagUsages())
			return nil
		}
		return usagef("errors: %v", err)
	}
	if fs.NArg() > 1 {
		return usagef("errors takes at most one run, got %q", fs.Args())
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	var run runInfo
	if fs.NArg() == 1 {
		if run, err = resolveRun(ctx, c, fs.Arg(0)); err != nil {
			return err
		}
	} else {
		dir := currentDir()
		if *workspace != "" {
			dir = *workspace
		}
		l, err := listRuns(ctx, c)
		if err != nil {
			return err
		}
		found := false
		for _, r := range l.runs { // newest first
			if r.Kind == "run" && r.Live() && inWorkspace(r.Root, dir) {
				run, found = r, true
				break
			}
		}
		if !found {
			return fmt.Errorf("no live flutter run in %s: name one (flyctl runs --all lists them)", dir)
		}
	}
	q := url.Values{}
	if *all {
		q.Set("all", "1")
	}
	if *follow {
		q.Set("follow", "1")
	}
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunErrors, run.RunID), q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !*follow {
		var pg wire.ErrorsPage
		b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		if err != nil {
			return err
		}
		if *asJSON {
			return writeIndentedJSON(stdout, b)
		}
		if err := json.Unmarshal(b, &pg); err != nil {
			return fmt.Errorf("read flyd's errors page: %w", err)
		}
		return printErrors(stdout, stderr, pg, true)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if *asJSON {
			if _, err := stdout.Write(append(line, '\n')); err != nil {
				return err
			}
			continue
		}
		var pg wire.ErrorsPage
		if err := json.Unmarshal(line, &pg); err != nil {
			return fmt.Errorf("read flyd's errors page: %w", err)
		}
		if pg.Type == wire.LogLineEnd {
			fmt.Fprintf(stderr, "flyctl: run %s ended (%s)\n", run.RunID, pg.State)
			return nil
		}
		if err := printErrors(stdout, stderr, pg, first); err != nil {
			return err
		}
		first = false
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the errors of run %s stopped: %w", run.RunID, err)
	}
	return nil
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
