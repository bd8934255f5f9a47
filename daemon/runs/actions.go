package runs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fly-dev/fly/store"
)

// Several agents work on one app: each start, reload, restart and stop is
// recorded with who asked, so that the others learn of it, and a session
// can claim a run for a while to work undisturbed.

// Act is who asks for an action on a run, and whether they override
// another session's claim.
type Act struct {
	By    store.Actor
	Force bool
	// ExitApp makes a stop of an attached app (kind app) end the app
	// itself rather than detach from it.
	ExitApp bool
}

// Action is one entry of a run's journal: what a client did to it.
type Action struct {
	Seq uint64 // increasing per run: the cursor of ActionsSince
	store.Action
}

// Line is the action in one line for another agent, relative to now:
// "cursor hot-reloaded this run 40s ago: applied, 2 new errors".
func (a Action) Line(now time.Time) string { return a.LineOn(now, "this run") }

// LineOn is Line with the run named as run.
func (a Action) LineOn(now time.Time, run string) string {
	ago := now.Sub(a.At).Round(time.Second)
	s := fmt.Sprintf("%s %s %s %s ago", a.By.Name(), PastTense(a.What), run, ago)
	if a.By.Workspace != "" {
		s += " from another workspace"
	}
	if a.Forced {
		s += " (overriding a claim)"
	}
	if a.Outcome != "" {
		s += ": " + a.Outcome
	}
	return s
}

// PastTense is what an action did, as a verb in the past tense:
// "hot-reloaded", "stopped".
func PastTense(what string) string {
	switch what {
	case "start":
		return "started"
	case "stop":
		return "stopped"
	case "attach":
		return "attached to"
	case "hot reload":
		return "hot-reloaded"
	case "hot restart":
		return "hot-restarted"
	case "claim":
		return "claimed"
	case "release":
		return "released"
	}
	return what
}

// maxJournal bounds a run's journal: a session that has not looked for
// longer learns only of the newest.
const maxJournal = 64

// Claim is a session's hold on a run: while it lasts, other sessions'
// reloads, restarts and stops are refused unless forced.
type Claim struct {
	By    store.Actor
	Note  string
	Since time.Time // when the holder first claimed: a renewal keeps it
	Until time.Time
}

// Bounds of a claim. A holder renews its claim by claiming again, but
// a claim lasts MaxClaimLife in all from its first grant, however often
// renewed: one session (or one that forgot it holds the run) must not
// keep the others out for ever. Once a claim has run out so, its holder
// may claim the run again only ClaimRest later, which leaves the others
// a window to act.
const (
	DefaultClaim = 15 * time.Minute
	MaxClaim     = time.Hour
	MaxClaimLife = time.Hour
	ClaimRest    = 10 * time.Minute
	maxClaimNote = 200
)

// ClaimedError is the refusal of an action on a run another session has
// claimed.
type ClaimedError struct {
	RunID string
	Claim Claim
}

func (e *ClaimedError) Error() string {
	c := e.Claim
	s := fmt.Sprintf("run %s is claimed by %s until %s (%s left)", e.RunID, c.By.Name(), c.Until.Format("15:04:05"),
		time.Until(c.Until).Round(time.Second))
	if c.Note != "" {
		s += fmt.Sprintf(": %q", c.Note)
	}
	return s + "; ask them, or pass force: true to act anyway (it is recorded)"
}

// logAction appends an action to the journal, makes it the record's last
// action, notes it in the log and saves the record.
func (r *Run) logAction(a store.Action) {
	if a.At.IsZero() {
		a.At = time.Now()
	}
	r.mu.Lock()
	r.actSeq++
	r.journal = append(r.journal, Action{Seq: r.actSeq, Action: a})
	if len(r.journal) > maxJournal {
		r.journal = r.journal[len(r.journal)-maxJournal:]
	}
	last := a
	r.rec.LastAction = &last
	r.mu.Unlock()
	line := a.By.Name() + ": " + a.What
	if a.Forced {
		line += " (forced over a claim)"
	}
	if a.Outcome != "" {
		line += ": " + a.Outcome
	}
	r.note(line)
	r.persist()
	// An action is on disk before its caller hears of it: a flyd that
	// dies a moment later forgets neither a claim nor the news of it.
	if db := r.eng.db; db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), actionFlushTimeout)
		defer cancel()
		if err := db.Flush(ctx); err != nil {
			r.eng.log.Warn("store an action", logRun, r.id, logErr, err)
		}
	}
}

// actionFlushTimeout bounds how long an action waits for the store.
const actionFlushTimeout = 5 * time.Second

// ActionsSince returns the journal's actions after seq, oldest first,
// and the newest seq (pass it next time).
func (r *Run) ActionsSince(seq uint64) ([]Action, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Action
	for _, a := range r.journal {
		if a.Seq > seq {
			out = append(out, a)
		}
	}
	return out, r.actSeq
}

// maxHeard bounds the sessions whose news cursor a run keeps: past it,
// the one told of least is forgotten (and hears the journal again).
const maxHeard = 64

// NewsFor returns the journal's actions after the newest that session
// handle was told of (all it holds, the first time), oldest first, and
// moves that session's cursor. The cursors are kept with the run's
// record: a run that outlives flyd tells a session that comes back to it
// (under the same handle) only what it has not heard.
func (r *Run) NewsFor(handle string) []Action {
	r.mu.Lock()
	since := r.heard[handle]
	var out []Action
	for _, a := range r.journal {
		if a.Seq > since {
			out = append(out, a)
		}
	}
	moved := r.actSeq != since
	if moved {
		if r.heard == nil {
			r.heard = make(map[string]uint64)
		}
		r.heard[handle] = r.actSeq
		if len(r.heard) > maxHeard {
			least, leastSeq := "", uint64(1<<63)
			for h, s := range r.heard {
				if s < leastSeq {
					least, leastSeq = h, s
				}
			}
			delete(r.heard, least)
		}
	}
	r.mu.Unlock()
	if moved {
		r.save()
	}
	return out
}

// claimLocked is the claim in force, if any; r.mu is held. A claim
// that ran out at the end of its life is remembered in r.spent.
func (r *Run) claimLocked(now time.Time) *Claim {
	if r.claim != nil && !now.Before(r.claim.Until) {
		if !r.claim.Until.Before(r.claim.Since.Add(MaxClaimLife)) {
			r.spent = &spentClaim{session: r.claim.By.Session, at: r.claim.Until}
		}
		r.claim = nil
	}
	return r.claim
}

// spentClaim is a claim that lasted MaxClaimLife: its holder rests.
type spentClaim struct {
	session string
	at      time.Time
}

// ClaimLifeError is the refusal of a claim by a session that has held
// the run for MaxClaimLife.
type ClaimLifeError struct {
	RunID string
	Since time.Time // the first grant
	Again time.Time // when it may claim again
}

func (e *ClaimLifeError) Error() string {
	return fmt.Sprintf("run %s has been claimed by you since %s, and a claim lasts %s in all however often renewed: "+
		"let the others act; you may claim it again from %s", e.RunID, e.Since.Format("15:04:05"), MaxClaimLife, e.Again.Format("15:04:05"))
}

// CurrentClaim returns the claim in force on the run, if any.
func (r *Run) CurrentClaim() (Claim, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.claimLocked(time.Now()); c != nil {
		return *c, true
	}
	return Claim{}, false
}

// allowed reports whether act may act on the run now: not while another
// session holds a claim, unless forced. forced says a claim was overridden.
func (r *Run) allowed(act Act) (forced bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.claimLocked(time.Now())
	if c == nil || c.By.Session == act.By.Session {
		return false, nil
	}
	if !act.Force {
		return false, &ClaimedError{RunID: r.id, Claim: *c}
	}
	return true, nil
}

// Claim holds the run for act's session for d (DefaultClaim when 0, at
// most MaxClaim) with a note for the others; the holder claims again to
// renew or change it. Another session's claim is refused unless forced.
func (r *Run) Claim(act Act, note string, d time.Duration) (Claim, error) {
	if act.By.Session == "" {
		return Claim{}, fmt.Errorf("only a client session can claim a run")
	}
	if !r.live() {
		return Claim{}, fmt.Errorf("run %s: %w", r.id, ErrRunEnded)
	}
	if d <= 0 {
		d = DefaultClaim
	}
	d = min(d, MaxClaim)
	forced, err := r.allowed(act)
	if err != nil {
		return Claim{}, err
	}
	now := time.Now()
	c := Claim{By: act.By, Note: boundNote(note), Since: now, Until: now.Add(d)}
	r.mu.Lock()
	if old := r.claimLocked(now); old != nil && old.By.Session == act.By.Session {
		c.Since = old.Since // a renewal: the claim's life goes on
	}
	if sp := r.spent; sp != nil && sp.session == act.By.Session && now.Before(sp.at.Add(ClaimRest)) {
		r.mu.Unlock()
		return Claim{}, &ClaimLifeError{RunID: r.id, Since: sp.at.Add(-MaxClaimLife), Again: sp.at.Add(ClaimRest)}
	}
	if end := c.Since.Add(MaxClaimLife); !now.Before(end) {
		r.mu.Unlock()
		return Claim{}, &ClaimLifeError{RunID: r.id, Since: c.Since, Again: end.Add(ClaimRest)}
	} else if c.Until.After(end) {
		c.Until = end
	}
	r.claim = &c
	r.mu.Unlock()
	outcome := "until " + c.Until.Format("15:04:05")
	if c.Note != "" {
		outcome += fmt.Sprintf(": %q", c.Note)
	}
	r.logAction(store.Action{What: "claim", By: act.By, At: now, Outcome: outcome, Forced: forced})
	return c, nil
}

// Release ends act's claim on the run (or, forced, anyone's). Releasing
// a run nobody claims is not an error.
func (r *Run) Release(act Act) error {
	r.mu.Lock()
	c := r.claimLocked(time.Now())
	if c == nil {
		r.mu.Unlock()
		return nil
	}
	forced := c.By.Session != act.By.Session
	if forced && !act.Force {
		cl := *c
		r.mu.Unlock()
		return &ClaimedError{RunID: r.id, Claim: cl}
	}
	r.claim = nil
	r.mu.Unlock()
	r.logAction(store.Action{What: "release", By: act.By, Forced: forced})
	return nil
}

// endClaim drops the claim of session, if it holds one: the session
// ended.
func (r *Run) endClaim(session string) {
	r.mu.Lock()
	c := r.claimLocked(time.Now())
	mine := c != nil && c.By.Session == session
	if mine {
		r.claim = nil
	}
	r.mu.Unlock()
	if mine {
		r.note(c.By.Name() + "'s claim ended with its session")
		r.announce()
	}
}

// ReleaseClaims ends every claim that session holds: it has ended. Not
// once the engine is closed: then flyd is stopping, not the session, and
// the claims of the runs that outlive flyd go on with them.
func (e *Engine) ReleaseClaims(session string) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return
	}
	for _, r := range e.Live() {
		r.endClaim(session)
	}
}

func boundNote(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
	if len(s) > maxClaimNote {
		s = s[:maxClaimNote]
		for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
			s = s[:len(s)-1]
		}
		s = strings.ToValidUTF8(s, "") + "…"
	}
	return s
}

// StopAs stops the run as Stop does, for act: refused while another
// session holds a claim (unless forced), and recorded.
func (r *Run) StopAs(ctx context.Context, act Act) error {
	if !r.live() {
		return nil
	}
	forced, err := r.allowed(act)
	if err != nil {
		return err
	}
	r.logAction(store.Action{What: "stop", By: act.By, Forced: forced, Outcome: stopPending})
	if r.kind == store.KindApp {
		return r.stopApp(ctx, act.ExitApp) // superviseApp puts how it ended in the action
	}
	return r.stop(ctx) // supervise puts how it ended in the action
}

// stopPending is the outcome of a stop until the run has ended.
const stopPending = "stopping"

// stopEnded puts how the run ended into the stop actions still pending;
// r.mu is held.
func (r *Run) stopEndedLocked(outcome string) {
	if a := r.rec.LastAction; a != nil && a.What == "stop" && a.Outcome == stopPending {
		la := *a
		la.Outcome = outcome
		r.rec.LastAction = &la
	}
	for i := range r.journal {
		if a := &r.journal[i]; a.What == "stop" && a.Outcome == stopPending {
			a.Outcome = outcome
		}
	}
}
