package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/spf13/pflag"
)

// logsTailAbout is what flyctl logs tail --help says it does.
const logsTailAbout = `Prints the log of a flutter run, build or tool that flyd keeps, like
docker logs, kubectl logs and journalctl. RUN is a run id or a unique
prefix of one (see flyctl runs); --latest takes the newest run or build
of the workspace that contains the current directory, else of any
workspace.

Output: one line per entry, "<stream> <text>", where stream is one of
  stdout  what the app or the tool printed
  stderr  what it printed as an error
  error   a framework error the app reported on its VM service, as
          flutter renders it (flyctl errors lists them deduplicated)
  event   a flutter --machine event (app.progress, app.started …)
  fly     flyd's own notes: how it started the run, how it ended …
-t puts the local time (15:04:05.000) in front. The text is the app's:
its escape sequences and other control and format characters are shown
escaped (\x1b[31m, \u202e), one entry to a line (\n); --raw prints it
as the app wrote it, for a terminal you trust it with. Streams are coloured
only when stdout is a terminal (and NO_COLOR is unset). -o json prints
NDJSON instead, one object per line:
  {"type":"entry","seq":N,"time":"…","stream":"…","text":"…","truncated":true,"cursor":"RUN:N"}
  {"type":"gap","seq":N,"time":"…","lost":N,"resume":N,"text":"…","cursor":"RUN:N"}
  {"type":"exit","run_id":"…","state":"…","exit_code":N,"error":"…","cursor":"RUN:N"}
("truncated" only on lines cut at 8 KiB, "exit" only at the end of -f).

Which lines: the last 10 (-n N; -n all for the whole log, -n 0 for none
of the past), or, when --after, --since or an existing --cursor-file
says where to start, every line from there. --since and --until take
an RFC 3339 time, a local "2006-01-02 15:04[:05]" or "15:04[:05]"
(today), or a duration meaning that long ago ("10m"); -g keeps the
lines whose text matches a regular expression (RE2 syntax). With
filters, -n counts the lines that match.

-f follows the log until the run ends and then prints how it ended:
  -- run RUN exited: stopped (exit code 0) --
It survives idle periods (flyd sends heartbeats) and reconnects with
backoff when the connection drops or flyd restarts, resuming after the
last line it got: no line is printed twice or skipped. Lines that were
evicted from flyd's memory before they could be read (and are not on
disk either) are reported as one line:
  -- 120 lines lost (no longer in flyd's log); resuming at seq 845 --
A run that was live when flyd crashed ends as "interrupted".

--cursor-file F reads where to start from F when it exists (and the run,
when neither RUN nor --latest is given), and writes the position of the
last line at exit, Ctrl-C included, so the next call prints only newer
lines (as journalctl --cursor-file does).

Exit status: 0, 1 on failure (no flyd, no such run) or, with
--exit-status, when the run failed, was interrupted or exited non-zero
(without -f: when it has already ended so); 2 on usage errors.`

// tailOptions is the command line of "logs tail": its flags, then what
// check derives from them.
type tailOptions struct {
	run        string
	latest     bool
	follow     bool
	lines      lineCount
	since      string
	until      string
	grep       string
	output     string
	json       bool
	timestamps bool
	after      uint64
	cursorFile string
	exitStatus bool
	raw        bool

	// Derived by parse.
	from, to time.Time
	re       *regexp.Regexp
	hasAfter bool // --after, or a cursor file that applies
	linesSet bool // -n was given
}

// lineCount is -n: a number of lines or "all".
type lineCount struct {
	n   int
	all bool
}

func (c *lineCount) String() string {
	if c.all {
		return "all"
	}
	return strconv.Itoa(c.n)
}

func (c *lineCount) Set(s string) error {
	if s == "all" {
		c.n, c.all = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a number of lines (0 or more) or all")
	}
	c.n, c.all = n, false
	return nil
}

func (c *lineCount) Type() string { return "N|all" }

func (o *tailOptions) flags(fs *pflag.FlagSet) {
	fs.SortFlags = false
	o.lines = lineCount{n: 10}
	fs.BoolVar(&o.latest, "latest", false, "the newest run or build of this workspace (else of any)")
	fs.BoolVarP(&o.follow, "follow", "f", false, "follow the log until the run ends, then print how it ended")
	fs.VarP(&o.lines, "lines", "n", "print the last `N` lines, or all (all from where --after, --since or a cursor file says)")
	fs.StringVar(&o.since, "since", "", "only lines at or after `TIME` (RFC 3339, 2006-01-02 15:04, 15:04, or a duration ago: 10m)")
	fs.StringVar(&o.until, "until", "", "only lines at or before `TIME` (as --since; not with -f)")
	fs.StringVarP(&o.grep, "grep", "g", "", "only lines whose text matches `REGEX` (RE2)")
	fs.StringVarP(&o.output, "output", "o", "text", "`FORMAT` of the output: text or json (NDJSON)")
	fs.BoolVar(&o.json, "json", false, "same as -o json")
	fs.BoolVarP(&o.timestamps, "timestamps", "t", false, "prefix text lines with their local time")
	fs.Uint64Var(&o.after, "after", 0, "start after the line with sequence number `SEQ`")
	fs.StringVar(&o.cursorFile, "cursor-file", "", "start after the cursor stored in `FILE`, and store the last one there at exit")
	fs.BoolVar(&o.exitStatus, "exit-status", false, "exit 1 when the run failed, was interrupted or exited non-zero")
	fs.BoolVar(&o.raw, "raw", false, "print the text as the app wrote it: escape sequences, controls and newlines not escaped")
}

// check checks the command line of "logs tail", whose flags fs parsed
// into o, and derives what the flags imply.
func (o *tailOptions) check(fs *pflag.FlagSet, now time.Time) error {
	switch fs.NArg() {
	case 0:
	case 1:
		o.run = fs.Arg(0)
	default:
		return usagef("logs tail takes one RUN, got %q", fs.Args())
	}
	if o.run != "" && o.latest {
		return usagef("logs tail: give a RUN or --latest, not both")
	}
	if o.run == "" && !o.latest && o.cursorFile == "" {
		return usagef("logs tail needs a RUN or --latest (flyctl runs lists the runs)")
	}
	switch {
	case o.json && fs.Changed("output") && o.output != "json":
		return usagef("logs tail: --json and -o %s contradict each other", o.output)
	case o.json:
		o.output = "json"
	case o.output != "text" && o.output != "json":
		return usagef("logs tail: -o %q: want text or json", o.output)
	}
	if o.until != "" && o.follow {
		return usagef("logs tail: --until cannot be combined with -f (a follow ends when the run ends)")
	}
	o.hasAfter = fs.Changed("after")
	if o.hasAfter && o.cursorFile != "" {
		return usagef("logs tail: --after and --cursor-file both say where to start; give one")
	}
	var err error
	if o.since != "" {
		if o.from, err = parseTimeArg(o.since, now); err != nil {
			return usagef("logs tail: --since: %v", err)
		}
	}
	if o.until != "" {
		if o.to, err = parseTimeArg(o.until, now); err != nil {
			return usagef("logs tail: --until: %v", err)
		}
	}
	if !o.from.IsZero() && !o.to.IsZero() && o.to.Before(o.from) {
		return usagef("logs tail: --until %s is before --since %s", o.until, o.since)
	}
	if o.grep != "" {
		if o.re, err = regexp.Compile(o.grep); err != nil {
			return usagef("logs tail: -g: %v", err)
		}
	}
	o.linesSet = fs.Changed("lines")
	return nil
}

// parseTimeArg reads --since and --until: an RFC 3339 time, a local date
// and time, a local time of today, or a duration before now.
func parseTimeArg(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration means that long ago and cannot be negative", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			y, m, d := now.Date()
			return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, now.Location()), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2025-01-02T15:04:05Z, 2025-01-02 15:04, 15:04) or a duration ago (10m, 1h30m)", s)
}

// A cursor names a position in a run's log: "<run id>:<seq>".
func formatCursor(runID string, seq uint64) string {
	return runID + ":" + strconv.FormatUint(seq, 10)
}

func parseCursor(s string) (runID string, seq uint64, err error) {
	s = strings.TrimSpace(s)
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q is not a cursor (RUN:SEQ)", s)
	}
	seq, err = strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not a cursor (RUN:SEQ)", s)
	}
	return s[:i], seq, nil
}

// readCursorFile returns the cursor stored in name; ok is false when the
// file does not exist.
func readCursorFile(name string) (runID string, seq uint64, ok bool, err error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("read cursor file: %w", err)
	}
	runID, seq, err = parseCursor(string(b))
	if err != nil {
		return "", 0, false, fmt.Errorf("cursor file %s: %w; remove it to start afresh", name, err)
	}
	return runID, seq, true, nil
}

// cmdLogsTail is "flyctl logs tail": it prints (and with -f follows)
// a run's log, and keeps the cursor file.
func cmdLogsTail(ctx context.Context, c *call, o *tailOptions) (err error) {
	if err := o.check(c.flags, time.Now()); err != nil {
		return err
	}
	stdout, stderr := c.stdout, c.stderr
	var cursorRun string
	var cursorSeq uint64
	if o.cursorFile != "" {
		var ok bool
		if cursorRun, cursorSeq, ok, err = readCursorFile(o.cursorFile); err != nil {
			return err
		}
		if !ok && o.run == "" && !o.latest {
			return usagef("logs tail: cursor file %s does not exist yet; give a RUN or --latest the first time", o.cursorFile)
		}
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	ri, err := o.target(ctx, lc, cursorRun)
	if err != nil {
		return err
	}
	t := &tailer{
		c:      lc,
		o:      o,
		runID:  ri.RunID,
		out:    bufio.NewWriterSize(stdout, 32<<10),
		stderr: stderr,
		color:  isTerminal(stdout) && c.getenv("NO_COLOR") == "" && c.getenv("TERM") != "dumb",
		last:   o.after,
	}
	if o.cursorFile != "" && cursorRun != "" {
		if cursorRun == ri.RunID {
			t.last, o.hasAfter = cursorSeq, true
		} else {
			fmt.Fprintf(stderr, "flyctl: cursor file %s is for run %s, not %s: starting afresh\n", o.cursorFile, cursorRun, ri.RunID)
		}
	}
	if !o.linesSet && (o.hasAfter || o.since != "") {
		o.lines = lineCount{all: true} // they say where to start
	}
	if o.cursorFile != "" {
		defer func() {
			if t.last == 0 {
				return
			}
			if werr := writeFileAtomic(o.cursorFile, []byte(formatCursor(t.runID, t.last)+"\n"), 0o644); werr != nil {
				err = errors.Join(err, fmt.Errorf("write cursor file: %w", werr))
			}
		}()
	}
	defer func() {
		if ferr := t.out.Flush(); err == nil {
			err = ferr
		}
	}()
	return t.run(ctx)
}

// target is the run whose log logs tail prints: --latest, the RUN given,
// or the run of the cursor file.
func (o *tailOptions) target(ctx context.Context, lc *localclient.Client, cursorRun string) (runInfo, error) {
	switch {
	case o.latest:
		l, err := lc.Runs(ctx)
		if err != nil {
			return runInfo{}, err
		}
		ri, ok := newestRun(l.Runs, currentDir())
		if !ok {
			return runInfo{}, errors.New("flyd has no runs yet; start one with the flutter_run tool")
		}
		return ri, nil
	case o.run != "":
		return resolveRun(ctx, lc, o.run)
	}
	ri, err := resolveRun(ctx, lc, cursorRun)
	if err != nil {
		return runInfo{}, fmt.Errorf("run of cursor file %s: %w", o.cursorFile, err)
	}
	return ri, nil
}
