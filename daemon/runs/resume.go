package runs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// Taking back, as flyd starts, the runs a flyd that stopped or died left
// to their holders: a live holder is reconnected and its run is live
// again (its log, its claims and journal, its VM-service connection); a
// holder that speaks no version this flyd does leaves the run logs only;
// a run whose holder is gone is ended, with nothing of it left.

// Resume takes back the runs Open found left to their holders, each on a
// goroutine of its own (owned by the engine), and clears the runs'
// directories nobody owns. They are in memory, live, when it returns;
// their holders answer a moment later. Call it once, after Open, with the
// store's writer running.
func (e *Engine) Resume() {
	recs := e.resumable
	e.resumable = nil
	defer func() { e.published = nil }()
	known := make(map[string]bool)
	for _, rec := range recs {
		known[rec.ID] = true
		r, err := e.restore(rec)
		if err != nil {
			e.log.Warn("cannot take back a held run", logRun, rec.ID, logErr, err)
			rec.State, rec.Error, rec.EndedAt = stateInterrupted, err.Error(), time.Now()
			_ = e.db.PutRun(rec)
			continue
		}
		e.mu.Lock()
		e.runs[r.id] = r
		e.mu.Unlock()
		e.wg.Add(1)
		go func() { // owned by the engine: ends when the run does, or flyd lets go of it
			defer e.wg.Done()
			r.resume()
		}()
	}
	e.sweep(known)
}

// restore makes the run of rec, left to its holder: its ring continues
// its stored log, and what clients did to it and hold on it is back.
func (e *Engine) restore(rec store.Record) (*Run, error) {
	opts := e.ringOptions()
	entries, err := e.db.Tail(rec.ID, opts.MaxEntries)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read its log: %w", err)
	}
	meta, _ := e.db.LogStats(rec.ID)
	opts.FirstSeq = meta.LastSeq
	ring, err := logring.Restore(opts, fromStore(entries))
	if err != nil {
		return nil, fmt.Errorf("restore its log: %w", err)
	}
	r := &Run{
		id: rec.ID, kind: rec.Kind, opts: optionsOf(rec.Kind), root: rec.Root, eng: e, ring: ring, rec: rec,
		pending: make(map[int]chan machineMsg), started: make(chan struct{}), done: make(chan struct{}),
		vm: vmFollower{ready: make(chan struct{})}, markSlot: -1, mode: rec.Mode,
		// Its requests' ids go on from far above any the previous flyd
		// can have left unanswered.
		nextReq: int(time.Now().UnixMilli() % (1 << 30)),
	}
	if len(entries) > 0 {
		r.quietBefore = entries[len(entries)-1].Time
	}
	if r.opts.errorList {
		r.errors = apperrors.NewList(apperrors.Limits{})
		r.scanner = apperrors.NewScanner(apperrors.Project{Root: rec.Root, Package: packageName(rec.Root)})
	}
	if rec.State == stateRunning {
		close(r.started)
	}
	for _, j := range rec.Journal {
		r.journal = append(r.journal, Action{Seq: j.Seq, Action: j.Action})
		r.actSeq = max(r.actSeq, j.Seq)
	}
	if c := rec.Claim; c != nil {
		r.claim = &Claim{By: c.By, Note: c.Note, Since: c.Since, Until: c.Until}
	}
	r.heard = maps.Clone(rec.Heard)
	control := ""
	if hc := e.cfg.Holders; hc != nil {
		control = hc.Control(rec.ID, rec.Holder)
	}
	h := newHeld(rec.Holder, control, holder.Proc{}, nil)
	h.last = meta.Mark
	// A flyd that died may have shown followers seqs it had not stored.
	// The records after the stored mark come again from the spool and
	// take the same seqs in the same order, so that a seq still means
	// one line: nothing of flyd's own goes between them (see tookBack).
	h.shown = e.published[rec.ID]
	r.proc = &process{held: h, runID: rec.ID, pid: rec.PID, started: rec.PIDStart}
	r.markSlot = e.marks.track(r.id)
	return r, nil
}

// resume reconnects to the run's holder and holds the run as Start does;
// a holder that is gone ends it, one that speaks no version of this
// flyd's leaves it logs only.
func (r *Run) resume() {
	h := r.proc.held
	st, err := holder.ReadState(h.dir)
	if errors.Is(err, holder.ErrFormat) && st.Holder.Same() {
		h.readable, h.holder = false, st.Holder
		r.degrade(h, heldLogsOnly, fmt.Sprintf("its holder (pid %d) keeps its files in a format this flyd does not read", st.Holder.PID))
		r.followAgain()
		r.watch(h)
		return
	}
	if err != nil {
		r.goneAtStart(h, fmt.Sprintf("its holder left no state (%v)", err))
		return
	}
	h.holder = st.Holder
	if h.control == "" {
		h.control = st.Control
	}
	if !st.Holder.Same() {
		r.goneAtStart(h, fmt.Sprintf("its holder (pid %d) was gone when flyd started", st.Holder.PID))
		return
	}
	_ = proc.ShareGroup(st.Child.PID, st.Holder.PID, uintptr(st.Job))
	c, err := holder.Dial(context.Background(), h.control, r.id, h.last)
	var ve *holder.VersionError
	switch {
	case errors.As(err, &ve):
		r.degrade(h, heldLogsOnly, fmt.Sprintf("its holder (pid %d) %v", st.Holder.PID, ve))
		r.followAgain()
		r.watch(h)
		return
	case err != nil:
		if c = r.reconnect(h); c == nil {
			if h.isDetached() {
				return
			}
			r.followAgain()
			r.holderGone(h)
			return
		}
	}
	h.set(c, heldLive, "")
	h.pending = fmt.Sprintf("flyd %s took this run back from its holder (pid %d, protocol %d): the app ran on, and what it printed meanwhile is in this log, from the holder's spool",
		wire.Version, st.Holder.PID, c.Version())
	r.tookBack(h, false)
	r.eng.log.Info("run taken back from its holder", logRun, r.id, logPID, r.proc.pid, "holder", st.Holder.PID, "protocol", c.Version())
	r.followAgain()
	r.announce()
	r.superviseHeld()
}

// followAgain follows the app's VM service again, as a flyd that has
// just started.
func (r *Run) followAgain() {
	if uri := r.record().VMServiceURI; uri != "" {
		r.followVM(uri)
	}
}

// goneAtStart ends a run whose holder was gone when flyd started: what
// its spool holds is taken; nothing of a run without a live holder is
// left (its group, if any is left, is killed).
func (r *Run) goneAtStart(h *heldProcess, why string) {
	if x := r.drainSpool(h); x != nil {
		r.endHeld(h, x, nil)
		return
	}
	if st, err := holder.ReadState(h.dir); err == nil && st.Exit != nil && st.Exit.Seq <= h.last {
		r.endHeld(h, st.Exit, nil)
		return
	}
	if orphaned, err := orphanedGroup(r.record()); err == nil && orphaned {
		r.eng.log.Warn("killing the process group of a run whose holder is gone", logRun, r.id, logPID, r.proc.pid)
		_ = killTree(r.proc.pid, r.id, proc.Kill)
		why += fmt.Sprintf("; its process group %d was still alive and was killed", r.proc.pid)
	}
	h.set(nil, heldDegraded, why)
	r.note(why)
	r.finish(nil, why)
	_ = holder.Remove(h.dir)
}

// sweep clears the runs' directories that no live run owns: one whose
// holder is gone is removed; a live holder with no run (a flyd died as it
// started one) has its run killed, and its directory goes at a later
// start.
func (e *Engine) sweep(known map[string]bool) {
	hc := e.cfg.Holders
	if hc == nil {
		return
	}
	ents, err := os.ReadDir(hc.Dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !ent.IsDir() || known[ent.Name()] {
			continue
		}
		dir := filepath.Join(hc.Dir, ent.Name())
		st, err := holder.ReadState(dir)
		if err != nil || !st.Holder.Same() {
			_ = holder.Remove(dir)
			continue
		}
		e.log.Warn("killing a run whose holder no record names", "dir", dir, logPID, st.Child.PID)
		if orphaned, err := orphanedGroup(store.Record{PID: st.Child.PID, PIDStart: st.Child.Start}); err == nil && orphaned {
			_ = killTree(st.Child.PID, st.Run, proc.Kill)
		}
	}
}
