package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
)

// This file is the tailer of flyctl logs tail: it prints a run's log,
// follows it and reconnects.

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
	c      *localclient.Client
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
	q := localclient.LogsOptions{After: t.last, Tail: localclient.AllLines}
	if !t.o.lines.all {
		if t.filtered() {
			t.win = &window{n: t.o.lines.n}
		} else {
			q.Tail = t.o.lines.n
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
		if t.o.exitStatus && end != nil && end.State != wire.RunStarting && end.State != wire.RunRunning && runFailed(end.State, end.ExitCode) {
			return fmt.Errorf("run %s ended %s", t.runID, outcome(shownState(end.State, end.Crashed), end.ExitCode, end.Error))
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
		before := t.last
		exit, err := t.stream(ctx, localclient.LogsOptions{After: t.last, Tail: localclient.AllLines, Follow: true})
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
	var ae *localclient.APIError
	var ue *url.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, errIdle), errors.Is(err, localclient.ErrNoDaemon), errors.Is(err, errDropped):
		return true
	case errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &ue):
		return true
	case errors.As(err, &ae):
		return ae.Status >= 500
	}
	return false
}

// Why a log stream ended early.
var (
	errDropped = errors.New("the connection to flyd dropped")
	errIdle    = fmt.Errorf("no line or heartbeat from flyd for %s", idleLimit)
)

// stream reads one GET of the run's log, handling each line, until its
// end or exit line, which it returns. A stream cut short returns
// errDropped or the read error; one silent for idleLimit is cut.
func (t *tailer) stream(ctx context.Context, q localclient.LogsOptions) (*logLine, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(idleLimit, func() { cancel(errIdle) })
	defer idle.Stop()
	s, err := t.c.Logs(ctx, t.runID, q)
	if err != nil {
		if errors.Is(context.Cause(ctx), errIdle) {
			return nil, errIdle
		}
		return nil, err
	}
	defer s.Close()
	for {
		l, err := s.Next()
		switch {
		case err == nil:
		case errors.Is(context.Cause(ctx), errIdle):
			return nil, errIdle
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, errDropped
		default:
			return nil, err
		}
		idle.Reset(idleLimit)
		switch l.Type {
		case wire.LogLineEntry, wire.LogLineGap:
			if err := t.handle(l); err != nil {
				return nil, err
			}
		case wire.LogLineEnd, wire.LogLineExit:
			return &l, nil
		}
		// Heartbeats only keep the connection alive; unknown types are
		// from a newer flyd and are skipped.
		if s.Buffered() == 0 {
			if err := t.out.Flush(); err != nil {
				return nil, err
			}
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
	"stderr": "\x1b[31m",   // red
	"error":  "\x1b[1;31m", // bold red
	"event":  "\x1b[36m",   // cyan
	"fly":    "\x1b[35m",   // magenta
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
	Crashed  bool   `json:"crashed,omitempty"`
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
		err = t.writeJSON(jsonExit{Type: wire.LogLineExit, RunID: t.runID, State: l.State, Crashed: l.Crashed, ExitCode: l.ExitCode, Error: l.Error, Cursor: formatCursor(t.runID, t.last)})
	} else {
		err = t.note(fmt.Sprintf("-- run %s exited: %s --", t.runID, safetext.Line(outcome(shownState(l.State, l.Crashed), l.ExitCode, l.Error))))
	}
	if err != nil {
		return err
	}
	if t.o.exitStatus && runFailed(l.State, l.ExitCode) {
		return fmt.Errorf("run %s ended %s", t.runID, outcome(shownState(l.State, l.Crashed), l.ExitCode, l.Error))
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
