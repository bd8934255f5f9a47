package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// A held run (a flutter run under its holder, see internal/holder and
// heldProcess): its output comes as the holder's records, each taken
// once (a record's entries are committed with its seq, the run's mark in
// the store, and flyd resumes after the mark); its connection is taken
// again when it breaks while the holder lives; when the holder is gone,
// what its spool holds is read from the files, and the app, if it lives
// on, is degraded until it ends or is stopped. Close lets go of a held
// run rather than stopping it (detach); the next flyd takes it back
// (Resume).

// Bounds of a held run's reader.
const (
	ackEvery      = 100 * time.Millisecond // how often the reader tells the holder what is committed, at most
	maxGroup      = 256                    // entries one group of records holds at most
	watchEvery    = 500 * time.Millisecond // how often a degraded run looks at its app and spool
	reconnectBase = 50 * time.Millisecond
	reconnectMax  = 2 * time.Second
)

// superviseHeld takes the run's records until its exit, reconnecting
// while its holder lives; then, if the holder is gone, what its files
// hold, and the app while it lives on.
func (r *Run) superviseHeld() {
	h := r.proc.held
	for {
		if r.readHeld(h) {
			return // it has ended
		}
		if h.isDetached() {
			return
		}
		if c := r.reconnect(h); c != nil {
			h.set(c, heldLive, "")
			continue
		}
		if h.isDetached() {
			return
		}
		r.holderGone(h)
		return
	}
}

// readHeld takes the run's records from its holder's connection until
// the run's exit (it reports true, the run ended) or the connection's
// end.
func (r *Run) readHeld(h *heldProcess) (ended bool) {
	c, _ := h.current()
	if c == nil {
		return false
	}
	for {
		m, err := c.Next()
		if err != nil {
			r.closeGroup(h.last)
			if !h.isDetached() {
				r.eng.log.Debug("the holder's connection ended", logRun, r.id, logErr, err)
			}
			h.set(nil, heldLive, "")
			return false
		}
		if m.Ping || m.Spool != nil {
			// A group left open for a record at hand ends here: what is
			// taken is committed, and so acknowledged, whatever comes next.
			r.closeGroup(h.last)
		}
		switch {
		case m.Ping:
			r.tookBack(h, true) // an idle app: nothing more is coming to take those seqs
			r.ackHeld(h, c, false)
		case m.Spool != nil:
			switch {
			case m.Spool.Full && !h.spoolFull:
				r.note("its holder's spool is full (" + m.Spool.Err + "): the app's output is held back, none of it lost, until there is room")
			case !m.Spool.Full && h.spoolFull:
				r.note("its holder's spool has room again: the app's output flows")
			}
			h.spoolFull = m.Spool.Full
			r.ackHeld(h, c, true) // flyd's acks are what make room (the holder says it again while full)
		default:
			if x := r.takeRecord(h, m.Record, c.Buffered()); x != nil {
				r.tookBack(h, true)
				r.endHeld(h, x, c)
				return true
			}
			r.tookBack(h, false)
			if !c.Buffered() {
				r.ackHeld(h, c, false)
			}
		}
	}
}

// takeRecord takes one record of the holder's, once: a line as the
// direct reader takes it, into the group of entries committed with the
// record's seq. more says that another record is at hand (the group
// stays open for it, up to maxGroup entries). It returns the exit, for
// the exit record.
func (r *Run) takeRecord(h *heldProcess, rec holder.Record, more bool) *holder.Exit {
	if rec.Seq <= h.last {
		return nil // taken already
	}
	if h.last != 0 && rec.Seq > h.last+1 {
		r.note(fmt.Sprintf("%d records of the app's output are missing: its holder's spool no longer had them", rec.Seq-h.last-1))
	}
	if rec.Type == holder.TypeExit {
		// Committed before its exit record, so that a flyd that dies
		// before the run's end is on disk takes the exit again.
		r.closeGroup(h.last)
		x := holder.Exit{Code: -1, Desc: "exit unknown"}
		_ = json.Unmarshal(rec.Data[:min(len(rec.Data), 4096)], &x)
		x.Seq = rec.Seq
		h.last = rec.Seq
		return &x
	}
	r.openGroup()
	stream := logring.Stdout
	if rec.Type == holder.TypeStderr {
		stream = logring.Stderr
	}
	r.handleLine(rec.Data, stream, rec.Cut, rec.Time)
	h.last = rec.Seq
	if !more || r.groupLen() >= maxGroup {
		r.closeGroup(h.last)
	}
	return nil
}

// tookBack notes that flyd took the run back from its holder, once its
// log is past the newest seq the flyd that died showed (or now, when
// nothing more is coming): the records taken again fill those seqs first,
// as they did before, so a follower's seq keeps meaning its line.
func (r *Run) tookBack(h *heldProcess, now bool) {
	if h.pending == "" || !now && r.ring.Last() < h.shown {
		return
	}
	r.note(h.pending)
	h.pending = ""
}

// ackHeld tells the holder how far its records are committed (the run's
// mark), at most every ackEvery unless now (after a flush).
func (r *Run) ackHeld(h *heldProcess, c *holder.Conn, now bool) {
	if !now && time.Since(h.ackedAt) < ackEvery {
		return
	}
	h.ackedAt = time.Now()
	mark := h.last
	if db := r.eng.db; db != nil {
		if now {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = db.Flush(ctx)
			cancel()
		}
		st, err := db.LogStats(r.id)
		if err != nil {
			return
		}
		mark = st.Mark
	}
	if mark > h.acked {
		if c.Ack(mark) == nil {
			h.acked = mark
		}
	}
}

// endHeld ends a held run whose exit came: its record is final and on
// disk before the holder hears that it may go.
func (r *Run) endHeld(h *heldProcess, x *holder.Exit, c *holder.Conn) {
	h.mu.Lock()
	h.exit = x
	h.mu.Unlock()
	r.finish(nil, "")
	if c != nil {
		_ = c.Ack(x.Seq) // the holder removes its files and goes
		c.Close()
		holder.Reap(h.holder.PID)
	} else {
		_ = holder.Remove(h.dir)
	}
}

// reconnect connects to the run's holder again while it lives, resuming
// after the last record taken. nil: the holder is gone (or flyd lets go).
func (r *Run) reconnect(h *heldProcess) *holder.Conn {
	wait := reconnectBase
	for !h.isDetached() {
		if !h.holder.Same() {
			return nil
		}
		c, err := holder.Dial(context.Background(), h.control, r.id, h.last)
		if err == nil {
			return c
		}
		var ve *holder.VersionError
		if errors.As(err, &ve) {
			return nil // cannot happen with the holder it spoke to; treated as gone
		}
		r.eng.log.Debug("reconnect to the run's holder", logRun, r.id, logErr, err)
		select {
		case <-time.After(wait):
		case <-h.detached:
		}
		wait = min(2*wait, reconnectMax)
	}
	return nil
}

// holderGone takes what the spool of a holder that is gone holds, and
// how the child ended; an app that lives on without it is degraded: it
// runs, flyd can stop it (signalling its group) and reach it through its
// VM service, until it ends.
func (r *Run) holderGone(h *heldProcess) {
	r.tookBack(h, true)
	if x := r.drainSpool(h); x != nil {
		r.endHeld(h, x, nil)
		return
	}
	st, _ := holder.ReadState(h.dir)
	if st.Exit != nil && st.Exit.Seq <= h.last {
		r.endHeld(h, st.Exit, nil)
		return
	}
	why := fmt.Sprintf("its holder (pid %d) is gone", h.holder.PID)
	r.degrade(h, heldDegraded, why)
	r.watch(h)
}

// degrade makes the run degraded or logs only, and says so in its log.
func (r *Run) degrade(h *heldProcess, mode heldMode, why string) {
	h.set(nil, mode, why)
	switch mode {
	case heldDegraded:
		r.note(why + ": the run is degraded. The app runs on; its output no longer reaches flyd, and hot reload goes through its VM service; " +
			"flutter_stop still ends it")
	case heldLogsOnly:
		r.note(why + ": logs only. flyd reads what its holder spools and can stop the app, but does not speak to the holder, " +
			"which it leaves running; hot reload goes through the app's VM service")
	}
	r.eng.log.Warn("held run "+map[heldMode]string{heldDegraded: "degraded", heldLogsOnly: "logs only"}[mode], logRun, r.id, "why", why)
	r.announce()
}

// watch follows a degraded or logs-only run: what its holder's spool
// gets (logs only), whether its holder and its app live, until it ends
// or flyd lets go of it.
func (r *Run) watch(h *heldProcess) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		if x := r.drainSpool(h); x != nil {
			r.endHeld(h, x, nil)
			return
		}
		mode, _ := h.state()
		holderAlive := mode == heldLogsOnly && h.holder.Same()
		if !holderAlive && !r.proc.alive() {
			if gone, err := orphanedGroup(store.Record{PID: r.proc.pid, PIDStart: r.proc.started}); err != nil || !gone {
				r.finish(nil, "")
				_ = holder.Remove(h.dir)
				return
			}
		}
		if mode == heldLogsOnly && !holderAlive {
			r.degrade(h, heldDegraded, fmt.Sprintf("its holder (pid %d) is gone", h.holder.PID))
		}
		select {
		case <-t.C:
		case <-h.detached:
			return
		}
	}
}

// drainSpool takes the records the holder's spool holds after the last
// one taken, from its files; it returns the exit when that is among
// them.
func (r *Run) drainSpool(h *heldProcess) *holder.Exit {
	if !h.readable {
		return nil
	}
	var exit *holder.Exit
	stop := errors.New("the exit")
	_, err := holder.ReadSpool(h.dir, h.last, func(rec holder.Record) error {
		if x := r.takeRecord(h, rec, true); x != nil {
			exit = x
			return stop
		}
		return nil
	})
	r.closeGroup(h.last)
	if errors.Is(err, holder.ErrFormat) {
		h.readable = false
		r.note("its holder's spool is of a format this flyd does not read: its output is not in this log")
	}
	return exit
}

// isDetached reports whether flyd has let go of the run (Close).
func (h *heldProcess) isDetached() bool {
	select {
	case <-h.detached:
		return true
	default:
		return false
	}
}

// kept reports whether Close lets go of the run rather than stopping
// it: its holder keeps it (or logs only: never flyd's to kill).
func (r *Run) kept() bool {
	if r.proc == nil || r.proc.held == nil {
		return false
	}
	mode, _ := r.proc.held.state()
	return mode != heldDegraded
}

// letGo lets go of a held run as flyd closes: what its reader took is
// committed, the holder hears so, and the connection ends; the run, its
// record (live) and its holder go on for the next flyd.
func (r *Run) letGo() {
	h := r.proc.held
	h.mu.Lock()
	if !h.letGo {
		h.letGo = true
		close(h.detached)
	}
	c := h.conn
	h.mu.Unlock()
	r.vm.stop()
	if c != nil {
		if db := r.eng.db; db != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if db.Flush(ctx) == nil {
				if st, err := db.LogStats(r.id); err == nil && st.Mark > 0 {
					_ = c.Ack(st.Mark)
				}
			}
			cancel()
		}
		c.Close()
	}
}

// Released is closed once this flyd lets go of the live run as it closes
// (Close: the run goes on with its holder, for the next flyd); never for
// a run that ends, or ends with flyd. Whoever follows a run stops then.
func (r *Run) Released() <-chan struct{} {
	if r.proc == nil || r.proc.held == nil {
		return nil
	}
	return r.proc.held.detached
}

// tellHolderVM tells the run's holder the app's VM service, for a flyd
// that finds the run without it.
func (r *Run) tellHolderVM(uri string) {
	if r.proc == nil || r.proc.held == nil {
		return
	}
	if c, _ := r.proc.held.current(); c != nil {
		_ = c.SetVM(uri)
	}
}

// restartHeld hot-reloads or restarts a held run whose holder cannot
// take a request (degraded, logs only) through its VM service, as for an
// attached app.
func (r *Run) restartHeld(ctx context.Context, full bool) (machineRestartResult, bool, error) {
	if r.proc == nil || r.proc.held == nil {
		return machineRestartResult{}, false, nil
	}
	if mode, _ := r.proc.held.state(); mode == heldLive {
		return machineRestartResult{}, false, nil
	}
	res, err := r.restartApp(ctx, full)
	return res, true, err
}

// Degraded is why the run's holder cannot serve it, "" when it can (or
// it has none): its holder is gone (degraded), or speaks no version this
// flyd does (logs only).
func (r *Run) Degraded() string {
	if r.proc == nil || r.proc.held == nil || !r.live() {
		return ""
	}
	switch mode, why := r.proc.held.state(); mode {
	case heldDegraded:
		return "degraded: " + why
	case heldLogsOnly:
		return "logs only: " + why
	}
	return ""
}

// Held says how the run's process is held: "" for one flyd owns
// directly, "holder" while its holder serves it, "reconnecting",
// "degraded" or "logs only".
func (r *Run) Held() string {
	if r.proc == nil || r.proc.held == nil {
		return ""
	}
	h := r.proc.held
	switch mode, _ := h.state(); mode {
	case heldDegraded:
		return "degraded"
	case heldLogsOnly:
		return "logs only"
	}
	if c, _ := h.current(); c == nil && r.live() {
		return "reconnecting"
	}
	return "holder"
}
