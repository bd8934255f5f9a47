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
			r.handleLine(line, stream, cut)
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

func (r *Run) handleLine(line []byte, stream logring.Stream, cut bool) {
	if stream == logring.Stdout && r.opts.machine && !cut {
		if p, ok := parseAppLog(line); ok {
			r.appLog(p)
			return
		}
		if m, ok := parseMachineLine(line); ok {
			r.handleMachine(m)
			return
		}
	}
	text := string(line)
	if cut {
		text += " …"
	}
	r.append(stream, text)
	if stream == logring.Stdout {
		r.report(text)
	}
}

// append adds one entry to the ring and queues it for the store.
func (r *Run) append(stream logring.Stream, text string) {
	if stream == logring.Stderr {
		if c := r.stderrCapture.Load(); c != nil {
			c.add(text)
		}
	}
	e := r.ring.Append(stream, text)
	if e.Seq == 0 || r.eng.db == nil {
		return
	}
	r.eng.marks.set(r.markSlot, e.Seq)
	_ = r.eng.db.Append(r.id, store.Entry{Seq: e.Seq, Time: e.Time, Stream: string(e.Stream), Text: e.Text, Truncated: e.Truncated})
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
func (r *Run) handleMachine(m machineMsg) {
	switch {
	case m.Event == "" && m.Method == "": // a response to flyd
		r.answered(m)
	case m.Method != "": // a request from flutter: app.exposeUrl is echoed back
		if p, err := machineParams[machineExposeURLParams](m); err == nil && m.Method == machineAppExposeURL {
			r.writeStdin(machineResponse(m.ID, map[string]string{"url": p.URL}))
		}
	default:
		r.machineEvent(m)
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
func (r *Run) machineEvent(m machineMsg) {
	changed := false
	switch m.Event {
	case machineAppLog:
		if p, err := machineParams[machineAppLogParams](m); err == nil {
			r.appLog(p)
			return
		}
	case machineAppStart:
		if p, err := machineParams[machineAppStartParams](m); err == nil {
			r.mu.Lock()
			r.rec.AppID = p.AppID
			r.mode = p.Mode
			r.mu.Unlock()
			changed = true
		}
	case machineAppDebugPort:
		if p, err := machineParams[machineDebugPortParams](m); err == nil {
			r.mu.Lock()
			r.rec.VMServiceURI = p.WSURI
			r.mu.Unlock()
			r.followVM(p.WSURI)
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
			r.append(logring.Stderr, string(p.Error))
		}
	}
	r.append(logring.Event, eventText(m))
	if changed {
		r.persist()
	}
}

// appLog adds the app's output of an app.log event to the log.
func (r *Run) appLog(p machineAppLogParams) {
	stream := logring.Stdout
	if p.Error {
		stream = logring.Stderr
	}
	r.append(stream, p.Log)
	if p.StackTrace != "" {
		r.append(stream, p.StackTrace)
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
