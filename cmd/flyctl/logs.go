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
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const logsUsage = `Usage:
  flyctl logs tail [RUN | --latest] [flags]

Prints the log of a flutter run, build or tool that flyd keeps, like
docker logs, kubectl logs and journalctl. RUN is a run id or a unique
prefix of one (see flyctl runs); --latest takes the newest run or build
of the workspace that contains the current directory, else of any
workspace.

Output: one line per entry, "<stream> <text>", where stream is stdout,
stderr, event (flutter's --machine events) or fly (flyd's own notes);
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
(without -f: when it has already ended so); 2 on usage errors.

Flags:
%s
Examples:
  flyctl logs tail --latest -f
  flyctl logs tail 01jq3v6xk2 -n all -g 'Exception|Error'
  flyctl logs tail --latest --since 10m -t
  flyctl logs tail --latest -f -o json | jq -r 'select(.type == "entry") | .text'
  flyctl logs tail --latest -f --exit-status && echo "app exited cleanly"
  flyctl logs tail --cursor-file ~/.cache/app.cursor --latest   # only what is new since last time
`

func runLogs(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("logs needs a verb: flyctl logs tail [RUN | --latest] [flags]")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, logsUsage, newTailFlags(&tailOptions{}).FlagUsages())
		return nil
	case "tail":
		return runLogsTail(ctx, args[1:], getenv, stdout, stderr)
	}
	return usagef("unknown logs verb %q; the verb is tail: flyctl logs tail [RUN | --latest] [flags]", args[0])
}

// tailOptions is the parsed command line of "logs tail".
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

func newTailFlags(o *tailOptions) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flyctl logs tail", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
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
	return fs
}

// parseTail parses and checks the command line of "logs tail".
func parseTail(args []string, now time.Time) (*tailOptions, bool, error) {
	o := &tailOptions{}
	fs := newTailFlags(o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, true, nil
		}
		return nil, false, usagef("logs tail: %v", err)
	}
	switch fs.NArg() {
	case 0:
	case 1:
		o.run = fs.Arg(0)
	default:
		return nil, false, usagef("logs tail takes one RUN, got %q", fs.Args())
	}
	if o.run != "" && o.latest {
		return nil, false, usagef("logs tail: give a RUN or --latest, not both")
	}
	if o.run == "" && !o.latest && o.cursorFile == "" {
		return nil, false, usagef("logs tail needs a RUN or --latest (flyctl runs lists the runs)")
	}
	switch {
	case o.json && fs.Changed("output") && o.output != "json":
		return nil, false, usagef("logs tail: --json and -o %s contradict each other", o.output)
	case o.json:
		o.output = "json"
	case o.output != "text" && o.output != "json":
		return nil, false, usagef("logs tail: -o %q: want text or json", o.output)
	}
	if o.until != "" && o.follow {
		return nil, false, usagef("logs tail: --until cannot be combined with -f (a follow ends when the run ends)")
	}
	o.hasAfter = fs.Changed("after")
	if o.hasAfter && o.cursorFile != "" {
		return nil, false, usagef("logs tail: --after and --cursor-file both say where to start; give one")
	}
	var err error
	if o.since != "" {
		if o.from, err = parseTimeArg(o.since, now); err != nil {
			return nil, false, usagef("logs tail: --since: %v", err)
		}
	}
	if o.until != "" {
		if o.to, err = parseTimeArg(o.until, now); err != nil {
			return nil, false, usagef("logs tail: --until: %v", err)
		}
	}
	if !o.from.IsZero() && !o.to.IsZero() && o.to.Before(o.from) {
		return nil, false, usagef("logs tail: --until %s is before --since %s", o.until, o.since)
	}
	if o.grep != "" {
		if o.re, err = regexp.Compile(o.grep); err != nil {
			return nil, false, usagef("logs tail: -g: %v", err)
		}
	}
	o.linesSet = fs.Changed("lines")
	return o, false, nil
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

// writeFileAtomic replaces name with data through a temporary file in
// the same directory and a rename, so a reader never sees half a file.
// A symlink is followed: its target is replaced, not the link. The mode
// of an existing file is kept.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	if target, err := filepath.EvalSymlinks(name); err == nil {
		name = target
	}
	if fi, err := os.Stat(name); err == nil {
		perm = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func runLogsTail(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, help, err := parseTail(args, time.Now())
	if help {
		fmt.Fprintf(stdout, logsUsage, newTailFlags(&tailOptions{}).FlagUsages())
		return nil
	}
	if err != nil {
		return err
	}
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
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	var ri runInfo
	switch {
	case o.latest:
		l, err := listRuns(ctx, c)
		if err != nil {
			return err
		}
		var ok bool
		if ri, ok = newestRun(l.runs, currentDir()); !ok {
			return errors.New("flyd has no runs yet; start one with the flutter_run tool")
		}
	case o.run != "":
		if ri, err = resolveRun(ctx, c, o.run); err != nil {
			return err
		}
	default:
		if ri, err = resolveRun(ctx, c, cursorRun); err != nil {
			return fmt.Errorf("run of cursor file %s: %w", o.cursorFile, err)
		}
	}
	t := &tailer{
		c:      c,
		o:      o,
		runID:  ri.RunID,
		out:    bufio.NewWriterSize(stdout, 32<<10),
		stderr: stderr,
		color:  isTerminal(stdout) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb",
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

// logLine is any NDJSON line of flyd's log stream.
type logLine = wire.LogLine

// Reconnection pacing of a follow, and how long it waits for a line
// (flyd sends a heartbeat every 15s while idle) before it takes the
// connection for dead.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
	idleLimit  = 45 * time.Second
)

// tailer prints one run's log. last is the cursor: the seq of the last
// entry or gap it has handled (printed, or filtered out), which is where
// a reconnect resumes and what --cursor-file stores.
type tailer struct {
	c      *client
	o      *tailOptions
	runID  string
	out    *bufio.Writer
	stderr io.Writer
	color  bool
	last   uint64
	win    *window // the last -n lines while reading the history with filters
}

// filtered reports whether lines are selected client-side (time, regex).
func (t *tailer) filtered() bool { return t.o.re != nil || !t.o.from.IsZero() || !t.o.to.IsZero() }

// run prints the history, then follows with -f.
func (t *tailer) run(ctx context.Context) error {
	// The history: the server cuts it to the last N unless the client
	// filters, in which case -n counts the lines that match.
	q := url.Values{}
	q.Set("after", strconv.FormatUint(t.last, 10))
	if !t.o.lines.all {
		if t.filtered() {
			t.win = &window{n: t.o.lines.n}
		} else {
			q.Set("tail", strconv.Itoa(t.o.lines.n))
		}
	}
	end, err := t.stream(ctx, q)
	if t.win != nil {
		for _, l := range t.win.lines() {
			if err := t.print(l); err != nil {
				return err
			}
		}
		t.win = nil
	}
	if err != nil && (!t.o.follow || !retryable(err)) {
		return err
	}
	if end != nil {
		t.last = max(t.last, end.LastSeq)
	}
	if !t.o.follow {
		if t.o.exitStatus && end != nil && end.State != "starting" && end.State != "running" && runFailed(end.State, end.ExitCode) {
			return fmt.Errorf("run %s ended %s", t.runID, outcome(end.State, end.ExitCode, end.Error))
		}
		return nil
	}
	return t.follow(ctx, err)
}

// follow streams the live log from t.last until the exit line,
// reconnecting while the connection drops or flyd is away. lost is the
// error that ended the previous connection, if any.
func (t *tailer) follow(ctx context.Context, lost error) error {
	delay := retryFirst
	for {
		if lost != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t.out.Flush()
			fmt.Fprintf(t.stderr, "flyctl: lost the log stream (%v); reconnecting in %s\n", lost, delay)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, retryMax)
		}
		q := url.Values{}
		q.Set("after", strconv.FormatUint(t.last, 10))
		q.Set("follow", "1")
		before := t.last
		exit, err := t.stream(ctx, q)
		if exit != nil {
			return t.exit(exit)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		if t.last != before {
			delay = retryFirst // it made progress: the next drop starts over
		}
		lost = err
	}
}

// retryable reports whether a follow should reconnect after err: flyd
// is away, or the connection dropped. A daemon of another protocol, an
// unknown run or a bad request are final.
func retryable(err error) bool {
	var ae *apiError
	var ue *url.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, errIdle), errors.Is(err, errNoDaemon), errors.Is(err, errDropped):
		return true
	case errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &ue):
		return true
	case errors.As(err, &ae):
		return ae.status >= 500
	}
	return false
}

// Why a log stream ended early.
var (
	errDropped = errors.New("the connection to flyd dropped")
	errIdle    = fmt.Errorf("no line or heartbeat from flyd for %s", idleLimit)
)

// stream reads one GET of the run's log with query q, handling each line,
// until its end or exit line, which it returns. A stream cut short
// returns errDropped or the read error; one silent for idleLimit is cut.
func (t *tailer) stream(ctx context.Context, q url.Values) (*logLine, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(idleLimit, func() { cancel(errIdle) })
	defer idle.Stop()
	resp, err := t.c.do(ctx, http.MethodGet, runRoute(wire.RouteRunLogs, t.runID), q)
	if err != nil {
		if errors.Is(context.Cause(ctx), errIdle) {
			return nil, errIdle
		}
		return nil, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		b, rerr := br.ReadBytes('\n')
		if len(b) > 0 && b[len(b)-1] == '\n' {
			idle.Reset(idleLimit)
			var l logLine
			if err := json.Unmarshal(b, &l); err != nil {
				return nil, fmt.Errorf("flyd sent a malformed log line %.100q: %w", b, err)
			}
			switch l.Type {
			case wire.LogLineEntry, wire.LogLineGap:
				if err := t.handle(l); err != nil {
					return nil, err
				}
			case wire.LogLineEnd, wire.LogLineExit:
				return &l, nil
			}
			// Heartbeats only keep the connection alive; unknown types
			// are from a newer flyd and are skipped.
			if br.Buffered() == 0 {
				if err := t.out.Flush(); err != nil {
					return nil, err
				}
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(context.Cause(ctx), errIdle):
			return nil, errIdle
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return nil, errDropped
		default:
			return nil, rerr
		}
	}
}

// handle takes an entry or gap line: each seq once, in order, then the
// filters, then the output (or the -n window).
func (t *tailer) handle(l logLine) error {
	if l.Seq <= t.last {
		return nil // never twice (flyd does not resend, but a cursor may be ahead)
	}
	t.last = l.Seq
	if !t.o.from.IsZero() && l.Time.Before(t.o.from) || !t.o.to.IsZero() && l.Time.After(t.o.to) {
		return nil
	}
	if l.Type == wire.LogLineEntry && t.o.re != nil && !t.o.re.MatchString(l.Text) {
		return nil
	}
	if t.win != nil {
		t.win.add(l)
		return nil
	}
	return t.print(l)
}

// ANSI colours of the streams on a terminal.
var streamColor = map[string]string{
	"stdout": "",
	"stderr": "\x1b[31m", // red
	"event":  "\x1b[36m", // cyan
	"fly":    "\x1b[35m", // magenta
}

const (
	colorNote  = "\x1b[33m" // yellow: gap and exit lines
	colorReset = "\x1b[0m"
)

// jsonLine is an entry or gap line of -o json.
type jsonLine struct {
	Type      string    `json:"type"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Stream    string    `json:"stream,omitempty"`
	Lost      uint64    `json:"lost,omitempty"`
	Resume    uint64    `json:"resume,omitempty"`
	Text      string    `json:"text"`
	Truncated bool      `json:"truncated,omitempty"`
	Cursor    string    `json:"cursor"`
}

// jsonExit is the exit line of -o json.
type jsonExit struct {
	Type     string `json:"type"`
	RunID    string `json:"run_id"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	Cursor   string `json:"cursor"`
}

func (t *tailer) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = t.out.Write(b)
	return err
}

// note writes a line about the log rather than from it.
func (t *tailer) note(s string) error {
	if t.color {
		s = colorNote + s + colorReset
	}
	_, err := fmt.Fprintln(t.out, s)
	return err
}

// print writes an entry or gap line.
func (t *tailer) print(l logLine) error {
	if t.o.output == "json" {
		jl := jsonLine{Type: l.Type, Seq: l.Seq, Time: l.Time, Text: l.Text, Cursor: formatCursor(t.runID, l.Seq)}
		if l.Type == wire.LogLineGap {
			jl.Lost, jl.Resume = l.Lost, l.Resume
		} else {
			jl.Stream, jl.Truncated = l.Stream, l.Truncated
		}
		return t.writeJSON(jl)
	}
	if l.Type == wire.LogLineGap {
		return t.note(fmt.Sprintf("-- %d %s lost (no longer in flyd's log); resuming at seq %d --", l.Lost, pluralize(l.Lost, "line", "lines"), l.Resume))
	}
	var b strings.Builder
	if t.o.timestamps {
		b.WriteString(l.Time.Local().Format("15:04:05.000"))
		b.WriteByte(' ')
	}
	stream := fmt.Sprintf("%-6s", l.Stream)
	if c := streamColor[l.Stream]; t.color && c != "" {
		stream = c + stream + colorReset
	}
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(shown(l.Text, t.o.raw))
	if l.Truncated {
		b.WriteString(" [truncated]")
	}
	b.WriteByte('\n')
	_, err := t.out.WriteString(b.String())
	return err
}

// exit prints how the followed run ended and, with --exit-status, turns
// a failure into flyctl's.
func (t *tailer) exit(l *logLine) error {
	t.last = max(t.last, l.LastSeq)
	var err error
	if t.o.output == "json" {
		err = t.writeJSON(jsonExit{Type: wire.LogLineExit, RunID: t.runID, State: l.State, ExitCode: l.ExitCode, Error: l.Error, Cursor: formatCursor(t.runID, t.last)})
	} else {
		err = t.note(fmt.Sprintf("-- run %s exited: %s --", t.runID, safetext.Line(outcome(l.State, l.ExitCode, l.Error))))
	}
	if err != nil {
		return err
	}
	if t.o.exitStatus && runFailed(l.State, l.ExitCode) {
		return fmt.Errorf("run %s ended %s", t.runID, outcome(l.State, l.ExitCode, l.Error))
	}
	return nil
}

func pluralize(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// window keeps the last n entries (and the gaps among them) of the
// history when -n applies to filtered lines.
type window struct {
	n       int
	items   []logLine
	entries int
	trimmed bool
}

func (w *window) add(l logLine) {
	w.items = append(w.items, l)
	if l.Type == wire.LogLineEntry {
		w.entries++
	}
	for w.entries > w.n {
		if w.items[0].Type == wire.LogLineEntry {
			w.entries--
		}
		w.items = w.items[1:]
		w.trimmed = true
	}
}

// lines returns what the window holds; gaps before its first entry are
// dropped once older entries were, as they concern lines not shown.
func (w *window) lines() []logLine {
	items := w.items
	for w.trimmed && len(items) > 0 && items[0].Type != wire.LogLineEntry {
		items = items[1:]
	}
	return items
}
