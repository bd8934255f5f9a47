package runs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// A run's output: its streams read line by line, --machine events
// applied to the run, every line into the ring and the store.

// read turns one output stream into log entries, parsing --machine lines
// on stdout. It never blocks on readers or disk: the ring takes every
// line and the store queues it.
func (r *Run) read(rd io.Reader, stream logring.Stream) {
	br := bufio.NewReaderSize(rd, 2*maxLine)
	for {
		line, cut, err := readLine(br)
		if len(line) > 0 || (err == nil && !cut) {
			r.handleLine(line, stream, cut, time.Time{})
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line without its newline, at most maxLine
// bytes; cut says the rest was skipped. A whole line is br's buffer,
// valid until the next read: handleLine copies what it keeps.
func readLine(br *bufio.Reader) (line []byte, cut bool, err error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = bytes.Clone(b[:maxLine])
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		return line, true, err
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) > maxLine {
		return b[:maxLine], true, err
	}
	return b, false, err
}

// handleLine takes one line of output, read at at (zero: now; a line a
// holder kept meanwhile has its own time).
func (r *Run) handleLine(line []byte, stream logring.Stream, cut bool, at time.Time) {
	if stream == logring.Stdout && r.opts.machine && !cut {
		if p, ok := parseAppLog(line); ok {
			r.appLog(p, at)
			return
		}
		if m, ok := parseMachineLine(line); ok {
			r.handleMachine(m, at)
			return
		}
	}
	text := string(line)
	if cut {
		text += " …"
	}
	r.appendAt(stream, text, at)
	if stream == logring.Stdout {
		r.report(text)
	}
}

// append adds one entry to the ring and queues it for the store.
func (r *Run) append(stream logring.Stream, text string) { r.appendAt(stream, text, time.Time{}) }

// appendAt is append for a line read at at (zero: now). Entries go to
// the store in the order of their seqs (under r.gmu), so that what a
// crash leaves committed is always the log up to some seq, never one
// with holes; while the run's reader holds a group open (openGroup), they
// join it, to be committed with its mark.
func (r *Run) appendAt(stream logring.Stream, text string, at time.Time) {
	if stream == logring.Stderr {
		if c := r.stderrCapture.Load(); c != nil {
			c.add(text)
		}
	}
	r.gmu.Lock()
	defer r.gmu.Unlock()
	e := r.ring.AppendAt(stream, text, at)
	if e.Seq == 0 || r.eng.db == nil {
		return
	}
	r.eng.marks.set(r.markSlot, e.Seq)
	se := store.Entry{Seq: e.Seq, Time: e.Time, Stream: string(e.Stream), Text: e.Text, Truncated: e.Truncated}
	if r.group != nil {
		r.group = append(r.group, se)
		return
	}
	_ = r.eng.db.Append(r.id, se)
}

// openGroup starts a group of entries: those appended until closeGroup
// are committed together, with the mark closeGroup gives (how far the
// holder's spool is taken). The run's reader alone opens and closes it.
func (r *Run) openGroup() {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	if r.group == nil {
		r.group = make([]store.Entry, 0, 16)
	}
}

// closeGroup queues the open group with mark, and ends it. It reports
// how many entries it held.
func (r *Run) closeGroup(mark uint64) int {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	g := r.group
	r.group = nil
	if r.eng.db != nil && g != nil {
		_ = r.eng.db.AppendGroup(r.id, g, mark)
	}
	return len(g)
}

// groupLen is how many entries the open group holds.
func (r *Run) groupLen() int {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	return len(r.group)
}

// note is flyd's own entry in the run's log.
func (r *Run) note(text string) { r.append(logring.Fly, text) }

// report forwards progress to the tool call waiting on this run, if any.
func (r *Run) report(message string) {
	r.mu.Lock()
	p := r.progress
	r.mu.Unlock()
	if p != nil && message != "" {
		p(message)
	}
}

// handleMachine applies one --machine message to the run: a response to
// one of flyd's requests, a request from flutter, or an event.
func (r *Run) handleMachine(m machineMsg, at time.Time) {
	switch {
	case m.Event == "" && m.Method == "": // a response to flyd
		r.answered(m)
	case m.Method != "": // a request from flutter: app.exposeUrl is echoed back
		if p, err := machineParams[machineExposeURLParams](m); err == nil && m.Method == machineAppExposeURL {
			r.writeStdin(machineResponse(m.ID, map[string]string{"url": p.URL}))
		}
	default:
		r.machineEvent(m, at)
	}
}

// answered hands a response to the request of flyd's it answers.
func (r *Run) answered(m machineMsg) {
	id, ok := m.intID()
	if !ok {
		return
	}
	r.mu.Lock()
	ch := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// machineEvent applies one --machine event to the run's record and logs
// it (but for app.log, whose text is the log).
func (r *Run) machineEvent(m machineMsg, at time.Time) {
	changed := false
	switch m.Event {
	case machineAppLog:
		if p, err := machineParams[machineAppLogParams](m); err == nil {
			r.appLog(p, at)
			return
		}
	case machineAppStart:
		if p, err := machineParams[machineAppStartParams](m); err == nil {
			r.mu.Lock()
			r.rec.AppID = p.AppID
			r.mode, r.rec.Mode = p.Mode, p.Mode
			r.mu.Unlock()
			changed = true
		}
	case machineAppDebugPort:
		if p, err := machineParams[machineDebugPortParams](m); err == nil {
			r.mu.Lock()
			r.rec.VMServiceURI = p.WSURI
			r.mu.Unlock()
			r.followVM(p.WSURI)
			r.tellHolderVM(p.WSURI)
			changed = true
		}
	case machineAppDTD:
		if p, err := machineParams[machineDTDParams](m); err == nil {
			r.mu.Lock()
			r.rec.DTDURI = p.URI
			r.mu.Unlock()
			changed = true
		}
	case machineAppStarted:
		r.mu.Lock()
		r.rec.State = stateRunning
		r.mu.Unlock()
		r.closeStarted()
		changed = true
	case machineAppProgress:
		if p, err := machineParams[machineProgressParams](m); err == nil && !p.Finished {
			r.report(p.Message)
		}
	case machineAppStop:
		if p, err := machineParams[machineAppStopParams](m); err == nil && p.Error != "" {
			r.mu.Lock()
			r.rec.Error = string(p.Error)
			r.mu.Unlock()
			r.appendAt(logring.Stderr, string(p.Error), at)
		}
	}
	r.appendAt(logring.Event, eventText(m), at)
	if changed {
		r.persist()
	}
}

// appLog adds the app's output of an app.log event to the log.
func (r *Run) appLog(p machineAppLogParams, at time.Time) {
	stream := logring.Stdout
	if p.Error {
		stream = logring.Stderr
	}
	r.appendAt(stream, p.Log, at)
	if p.StackTrace != "" {
		r.appendAt(stream, p.StackTrace, at)
	}
	if r.scanner != nil {
		for _, e := range r.scanner.Text(p.Log, p.Error, p.StackTrace) {
			r.addError(e, time.Now(), false)
		}
	}
}

// eventText is the log line of a --machine event: its name and params.
func eventText(m machineMsg) string {
	if len(m.Params) == 0 {
		return m.Event
	}
	return m.Event + " " + string(m.Params)
}
