package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// errorsAbout is what flyctl errors --help says it does.
const errorsAbout = `Prints the framework errors of a flutter run (layout overflows, build and
gesture exceptions, unhandled exceptions), which flutter run --machine
never prints: one line each, deduplicated with a count (3× is three
times), with the error-causing widget's location, the most recently seen
first. By default those since the last hot reload or restart; --all
includes older ones, each labelled with when it was seen: [start] before
the first hot reload or restart, [reload N] after the Nth (the same
error seen in two of them is two lines).
An error's text is the app's: flyd keeps its escape sequences and other
control and format characters escaped (\x1b[2J, \u202e), and flyctl
prints nothing else (flyctl logs tail --raw shows the app's output as
it came).
RUN is a run id or a unique prefix of one; the default is the newest
live flutter run of the workspace containing the current directory (or
--workspace DIR).

-f follows: after the errors so far it prints each new error as it
comes, and an error seen again with its new count at most every 5
seconds (its last count when the run ends), until the run ends; a hot
reload or restart is a line "-- reload N --" (with --all, its errors
are labelled instead). --json prints flyd's errors page (with -f, one
page per line as flyd sends them, NDJSON); its fields may grow but never
change meaning.`

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
		return printErrors(c.stdout, c.stderr, *pg, o.all)
	}
	s, err := lc.FollowErrors(ctx, run.RunID, o.all)
	if err != nil {
		return err
	}
	if o.json {
		defer s.Close()
		for {
			line, err := s.NextRaw()
			if err != nil {
				return followEnd(ctx, run.RunID, err)
			}
			if _, err := c.stdout.Write(append(line, '\n')); err != nil {
				return err
			}
		}
	}
	p := &errorsPrinter{w: c.stdout, stderr: c.stderr, all: o.all, follow: true, every: errorsRepeatEvery}
	return followErrors(ctx, s.Next, s.Close, p, run.RunID)
}

// errorsRepeatEvery is the shortest time between two lines of one error
// in flyctl errors -f: a new error is printed at once, its growing count
// at most this often.
const errorsRepeatEvery = 5 * time.Second

// followErrors prints the pages that next returns with p until the run
// ends, the stream fails or ctx is done, and then the counts still held
// back. closeStream ends a call of next in progress.
func followErrors(ctx context.Context, next func() (wire.ErrorsPage, error), closeStream func() error, p *errorsPrinter, runID string) error {
	type page struct {
		pg  wire.ErrorsPage
		err error
	}
	pages, stop := make(chan page), make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		closeStream()
		wg.Wait()
	}()
	wg.Go(func() { // the reader: followErrors stops it and waits for it
		for {
			pg, err := next()
			select {
			case pages <- page{pg, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	for {
		var due <-chan time.Time
		if at, ok := p.due(); ok {
			due = time.After(time.Until(at))
		}
		select {
		case n := <-pages:
			if n.err != nil {
				if err := p.flush(time.Now(), true); err != nil {
					return err
				}
				return followEnd(ctx, runID, n.err)
			}
			if n.pg.Type == wire.LogLineEnd {
				if err := p.flush(time.Now(), true); err != nil {
					return err
				}
				fmt.Fprintf(p.stderr, "flyctl: run %s ended (%s)\n", runID, shownState(n.pg.State, n.pg.Crashed))
				return nil
			}
			if err := p.page(n.pg, time.Now()); err != nil {
				return err
			}
		case now := <-due:
			if err := p.flush(now, false); err != nil {
				return err
			}
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

// printErrors prints a page's errors, one line each (see errorsPrinter);
// a run without any says so on stderr.
func printErrors(stdout, stderr io.Writer, pg wire.ErrorsPage, all bool) error {
	return (&errorsPrinter{w: stdout, stderr: stderr, all: all}).page(pg, time.Now())
}

// errorsPrinter prints the errors of flyctl errors, one line each,
// escaped (flyd sends them so; a flyd of another version may not), with
// their generation's label under --all. Following, it prints a new error
// at once and an error seen again at most every every, holding its newer
// count back until its turn (flush prints what is due).
type errorsPrinter struct {
	w, stderr io.Writer
	all       bool // label each line with its generation
	follow    bool
	every     time.Duration

	pages      int                      // pages printed
	generation int                      // of the last page
	shown      map[uint64]shownError    // errors printed within the last every
	held       map[uint64]wire.AppError // newer counts of shown errors, waiting for their turn
}

// shownError is when an error's line was last printed, and its count then.
type shownError struct {
	at    time.Time
	count int
}

// page prints a page of errors at now: the first page of a run without
// any says so on stderr.
func (p *errorsPrinter) page(pg wire.ErrorsPage, now time.Time) error {
	first := p.pages == 0
	p.pages++
	if len(pg.Errors) == 0 && first {
		what := "no errors"
		if pg.Generation > 0 && !p.all {
			what += " since the last reload (" + strconv.Itoa(pg.Total) + " in all; --all shows them)"
		}
		fmt.Fprintf(p.stderr, "flyctl: run %s: %s\n", pg.RunID, what)
	}
	if p.follow && !first && !p.all && pg.Generation > p.generation {
		// The errors that follow are the new generation's: the old
		// one's held counts go first, then a line says where it changed.
		if err := p.flush(now, true); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(p.w, "-- reload %d --\n", pg.Generation); err != nil {
			return err
		}
	}
	p.generation = max(p.generation, pg.Generation)
	for _, e := range pg.Errors {
		if !p.follow {
			if err := p.print(e); err != nil {
				return err
			}
			continue
		}
		s, ok := p.shown[e.ID]
		switch {
		case ok && s.count == e.Count:
		case ok && now.Sub(s.at) < p.every:
			if p.held == nil {
				p.held = make(map[uint64]wire.AppError)
			}
			p.held[e.ID] = e
		default:
			if err := p.show(e, now); err != nil {
				return err
			}
		}
	}
	if pg.Dropped > 0 && first {
		fmt.Fprintf(p.stderr, "flyctl: %d older distinct errors are no longer kept\n", pg.Dropped)
	}
	p.forget(now)
	return nil
}

// due returns when the next held count is to be printed, if one is held.
func (p *errorsPrinter) due() (time.Time, bool) {
	var next time.Time
	for id := range p.held {
		if at := p.shown[id].at.Add(p.every); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// flush prints the held counts whose turn has come at now, or all of
// them, oldest turn first.
func (p *errorsPrinter) flush(now time.Time, all bool) error {
	var due []wire.AppError
	for id, e := range p.held {
		if all || !now.Before(p.shown[id].at.Add(p.every)) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b wire.AppError) int { return p.shown[a.ID].at.Compare(p.shown[b.ID].at) })
	for _, e := range due {
		if err := p.show(e, now); err != nil {
			return err
		}
	}
	p.forget(now)
	return nil
}

// show prints e at now and remembers it.
func (p *errorsPrinter) show(e wire.AppError, now time.Time) error {
	delete(p.held, e.ID)
	if p.shown == nil {
		p.shown = make(map[uint64]shownError)
	}
	p.shown[e.ID] = shownError{at: now, count: e.Count}
	return p.print(e)
}

// forget drops the errors printed longer than every ago with no count
// held: the next time one is seen, it is printed at once. What is
// remembered is what changed within every.
func (p *errorsPrinter) forget(now time.Time) {
	for id, s := range p.shown {
		if _, held := p.held[id]; !held && now.Sub(s.at) >= p.every {
			delete(p.shown, id)
		}
	}
}

// print writes e's line, after its generation's label under --all.
func (p *errorsPrinter) print(e wire.AppError) error {
	line := safetext.Line(e.Line)
	if p.all {
		line = generationLabel(e.Generation) + " " + line
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}

// generationLabel names the reload generation n: "[start]" before the
// first hot reload or restart, "[reload N]" after the Nth.
func generationLabel(n int) string {
	if n <= 0 {
		return "[start]"
	}
	return "[reload " + strconv.Itoa(n) + "]"
}
