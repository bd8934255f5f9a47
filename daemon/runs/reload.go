package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/store"
)

// A hot reload is honest about what it did: flutter's answer, what
// flutter printed on stderr meanwhile (compile errors), and the app's
// errors that came after it until the first frame drawn with the new code
// (or SettleMax). Reloads of one run are serialized; requests of one kind
// that arrive while another reload is in flight are coalesced into the
// next one, and every caller gets the outcome of the reload that covered
// its request.

// Outcome is what a hot reload or restart did.
type Outcome struct {
	Full    bool
	Code    int    // flutter's: 0 is applied
	Message string // flutter's message, at most maxReloadMessage bytes
	// Rejected: the VM refused the reload (a change hot reload cannot
	// apply, such as a changed class shape); a hot restart is needed.
	Rejected bool
	Stderr   []string // what flutter printed on stderr during it: compile errors
	// Errors are the app's errors that appeared after it, within the
	// settle window, newest first; ErrorsText says them in lines.
	Errors     []apperrors.Entry
	ErrorsText string
	ErrorsMore bool
	// Settled says how the settle window ended: "first frame", or
	// "timeout" when no frame came within SettleMax.
	Settled string
	Took    time.Duration
	// Shared lists the other clients whose requests the same reload
	// covered.
	Shared []store.Actor
}

// Applied reports whether flutter applied the change.
func (o Outcome) Applied() bool { return o.Code == 0 }

// Summary is the outcome in one line: "applied, no new errors",
// "applied, 2 new errors", "rejected: a hot restart is needed".
func (o Outcome) Summary() string {
	switch {
	case o.Rejected:
		return "rejected: a hot restart is needed"
	case !o.Applied() && len(o.Stderr) > 0:
		return fmt.Sprintf("failed (code %d): compile errors", o.Code)
	case !o.Applied():
		return fmt.Sprintf("failed (code %d): %s", o.Code, oneLine(o.Message, 120))
	case len(o.Errors) == 0:
		return "applied, no new errors"
	case len(o.Errors) == 1:
		return "applied, 1 new error"
	}
	return fmt.Sprintf("applied, %d new errors", len(o.Errors))
}

// oneLine is s on one line, made safe to show (safetext.Field) and cut
// to n bytes on a rune boundary.
func oneLine(s string, n int) string {
	return safetext.Cut(safetext.Field(strings.Join(strings.Fields(s[:min(len(s), 4*n)]), " ")), n)
}

// SettleMax bounds the settle window after a reload when no frame comes.
const SettleMax = time.Second

// Bounds of what an outcome keeps.
const (
	maxReloadStderr = 40
	// maxReloadMessage bounds flutter's (or the app's VM service's)
	// message: it is shown whole to every caller of the reload.
	maxReloadMessage = 2 << 10
	outcomeErrors    = 2 << 10 // bytes of error lines
)

// reloads serializes and coalesces a run's reloads.
type reloads struct {
	mu      sync.Mutex
	pending [2]*reloadBatch // waiting to run, by kind (0 reload, 1 restart)
	exec    sync.Mutex      // held while one runs
}

type reloadBatch struct {
	full bool
	by   []store.Actor
	done chan struct{}
	out  Outcome
	err  error
}

// Restart hot-reloads (full false) or hot-restarts the app of a live
// `flutter run` for act, and returns what it did. It fails with
// ErrRunEnded or ErrNotStarted when there is no app to restart, and with
// a *ClaimedError while another session holds a claim.
func (r *Run) Restart(ctx context.Context, full bool, act Act) (Outcome, error) {
	rec := r.record()
	switch {
	case rec.Kind != store.KindRun && rec.Kind != store.KindApp:
		return Outcome{}, fmt.Errorf("%s is a %s, not a flutter run", r.id, rec.Kind)
	case !r.live():
		return Outcome{}, fmt.Errorf("run %s: %w (%s)", r.id, ErrRunEnded, rec.State)
	case (rec.AppID == "" && rec.Kind == store.KindRun) || rec.State != stateRunning:
		return Outcome{}, fmt.Errorf("run %s: %w", r.id, ErrNotStarted)
	}
	forced, err := r.allowed(act)
	if err != nil {
		return Outcome{}, err
	}
	kind := 0
	if full {
		kind = 1
	}
	rl := &r.reloads
	rl.mu.Lock()
	b := rl.pending[kind]
	leader := b == nil
	if leader {
		b = &reloadBatch{full: full, done: make(chan struct{})}
		rl.pending[kind] = b
	}
	b.by = append(b.by, act.By)
	rl.mu.Unlock()
	if leader {
		// The leader runs the batch to the end even if its own caller
		// goes away: others wait on it. Bounded by the request timeout
		// and SettleMax.
		r.runBatch(context.WithoutCancel(ctx), b, kind)
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
	if b.err != nil {
		return Outcome{}, b.err
	}
	out := b.out
	out.Shared = nil
	for _, a := range b.by {
		if a != act.By {
			out.Shared = append(out.Shared, a)
		}
	}
	r.logAction(store.Action{What: what(full), By: act.By, Forced: forced, Outcome: sharedNote(out)})
	return out, nil
}

func what(full bool) string {
	if full {
		return "hot restart"
	}
	return "hot reload"
}

func sharedNote(o Outcome) string {
	s := o.Summary()
	if len(o.Shared) > 0 {
		names := make([]string, len(o.Shared))
		for i, a := range o.Shared {
			names[i] = a.Name()
		}
		s += " (one " + what(o.Full) + " with " + strings.Join(names, ", ") + ")"
	}
	return s
}

// runBatch waits for the reload in flight, then does b's and closes its
// done. Requests that come meanwhile join b until it starts.
func (r *Run) runBatch(ctx context.Context, b *reloadBatch, kind int) {
	rl := &r.reloads
	rl.exec.Lock()
	defer rl.exec.Unlock()
	rl.mu.Lock()
	rl.pending[kind] = nil // later requests form the next batch
	rl.mu.Unlock()
	b.out, b.err = r.reload(ctx, b.full)
	close(b.done)
}

// reload does one hot reload or restart and waits for it to settle.
func (r *Run) reload(ctx context.Context, full bool) (Outcome, error) {
	start := time.Now()
	out := Outcome{Full: full}
	if r.errors != nil && r.record().VMServiceURI != "" {
		// Right after the start, the VM-service connection may not be
		// up yet: without it the reload's frame and errors come late.
		t := time.NewTimer(vmReadyWait)
		select {
		case <-r.vm.ready:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	var since uint64
	if r.errors != nil {
		since = r.errors.Rev()
		r.errors.Reloaded() // what the app reports from now on is of the new code
	}
	frames := r.frames.mark()
	capture := &lineCapture{max: maxReloadStderr}
	r.stderrCapture.Store(capture)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := r.restartRequest(ctx, full, capture)
	r.stderrCapture.Store(nil)
	out.Stderr = capture.lines()
	if err != nil {
		return Outcome{}, err
	}
	out.Code, out.Message = res.Code, oneLine(res.Message, maxReloadMessage)
	out.Rejected = res.Code != 0 && rejected(out.Message+" "+strings.Join(out.Stderr, " "))
	if out.Applied() {
		out.Settled = "timeout"
		if r.frames.wait(ctx, frames, SettleMax) {
			out.Settled = "first frame"
		}
	}
	if r.errors != nil {
		pg := r.errors.Read(since, false, outcomeErrors)
		out.Errors, out.ErrorsText, out.ErrorsMore = pg.Entries, pg.Text, pg.More
	}
	out.Took = time.Since(start)
	return out, nil
}

// restartRequest asks flutter for the reload: app.restart on a run's
// stdin, or the registered service of an attached app.
func (r *Run) restartRequest(ctx context.Context, full bool, capture *lineCapture) (machineRestartResult, error) {
	if r.kind == store.KindApp {
		return r.restartApp(ctx, full)
	}
	if res, ok, err := r.restartHeld(ctx, full); ok {
		return res, err // its holder cannot take the request: through the VM service
	}
	rec := r.record()
	m, err := r.request(ctx, "app.restart", machineRestartParams{AppID: rec.AppID, FullRestart: full, Reason: "manual"})
	if err == nil && m.Error == "" && !bytes.Contains(m.Result, []byte(`"code":0`)) {
		// flutter wrote why on stderr before it answered on stdout; the
		// two pipes are read apart.
		capture.settle(ctx, stderrWait, stderrQuiet)
	}
	if err != nil {
		return machineRestartResult{}, fmt.Errorf("%s of run %s: %w", what(full), r.id, err)
	}
	if m.Error != "" {
		return machineRestartResult{}, fmt.Errorf("%s of run %s: flutter says: %s", what(full), r.id, m.Error)
	}
	var res machineRestartResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return machineRestartResult{}, fmt.Errorf("%s of run %s: unexpected reply %s", what(full), r.id, m.Result)
	}
	return res, nil
}

// rejected reports whether flutter's words say the VM rejected a reload
// ("Reload rejected: …", "Hot reload was rejected: …"), as opposed to a
// compile error.
func rejected(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "reload rejected") || strings.Contains(s, "was rejected") || strings.Contains(s, "hot restart is needed") ||
		strings.Contains(s, "requires a hot restart") || strings.Contains(s, "requires a full restart")
}

// How long a failed reload waits for flutter's stderr: at most
// stderrWait for the first line, then until none came for stderrQuiet.
const (
	stderrWait  = 500 * time.Millisecond
	stderrQuiet = 30 * time.Millisecond
)

// lineCapture keeps the first lines of a stream while a reload runs.
type lineCapture struct {
	mu   sync.Mutex
	max  int
	got  []string
	more chan struct{} // closed and replaced at each line
}

func (c *lineCapture) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) < c.max {
		c.got = append(c.got, oneLine(line, 400))
	}
	if c.more != nil {
		close(c.more)
		c.more = nil
	}
}

// settle waits for the first line (at most wait), then until no line came
// for quiet (at most wait in all).
func (c *lineCapture) settle(ctx context.Context, wait, quiet time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		n := len(c.got)
		if c.more == nil {
			c.more = make(chan struct{})
		}
		more := c.more
		c.mu.Unlock()
		var gap <-chan time.Time
		if n > 0 {
			t := time.NewTimer(quiet)
			defer t.Stop()
			gap = t.C
		}
		select {
		case <-more:
		case <-gap:
			return
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (c *lineCapture) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// frameSignal counts the frames the app reports on its VM service
// (Flutter.Frame) and lets a reload wait for the next one.
type frameSignal struct {
	mu     sync.Mutex
	n      uint64
	newest int64         // the newest frame's timestamp (the device's ms)
	ch     chan struct{} // closed and replaced at every frame
}

// seen takes a frame stamped at ts: a new one (newer than any before,
// and live, not history) is counted and wakes the waiters.
func (f *frameSignal) seen(ts int64, live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ts <= f.newest && ts > 0 {
		return
	}
	f.newest = max(f.newest, ts)
	if !live {
		return
	}
	f.n++
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// mark is the count of frames now.
func (f *frameSignal) mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait waits until a frame after mark, at most d; it reports whether one
// came.
func (f *frameSignal) wait(ctx context.Context, mark uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		f.mu.Lock()
		if f.n > mark {
			f.mu.Unlock()
			return true
		}
		if f.ch == nil {
			f.ch = make(chan struct{})
		}
		ch := f.ch
		f.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
