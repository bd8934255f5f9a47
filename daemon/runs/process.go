package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/store"
)

// process is a run's operating-system process, and the one place on
// flyd's side that owns it, in one of two ways:
//
//   - directly (cmd): it makes the command (in the run's root, with the
//     client's environment and the run's mark), starts it as the leader
//     of a process group of its own, signals that group and what left it
//     (killTree), waits for it, says how it ended and releases the group
//     once nothing will signal it again (proc.Release: on Windows that
//     closes the run's job object, which ends what is left in it);
//   - through the run's holder (held, see heldProcess and
//     internal/holder), a process of flyd's own binary that outlives
//     flyd: the holder starts, signals, waits for and releases the
//     child; flyd speaks to it, and signals the group itself only when
//     the holder is gone.
//
// The rest of the engine reads the run's output (from the pipes, or the
// holder's records) and asks it to signal, write or wait; nothing else
// holds the exec.Cmd, the holder's connection or signals a live run's pid
// (Open kills, by their records, the groups a flyd that died left behind).
type process struct {
	cmd            *exec.Cmd    // nil for a held process
	held           *heldProcess // nil for a direct one
	runID          string       // the value of its mark: see EnvMarker
	endsWithLeader bool         // see kindOptions

	stdin   io.WriteCloser // nil unless the kind writes to it
	stdout  io.ReadCloser  // the engine's to read, or the caller's (kindOptions.callerSpeaks)
	stderr  io.ReadCloser
	stderrW *os.File // the child's end of an engine-made stderr pipe, until the start; nil with StderrPipe

	pid     int    // once started
	started uint64 // its start time (internal/proc); 0 when unknown

	// The group is released once the leader has been waited for and no
	// stop is under way (a stop signals the group after the leader's
	// exit, to end what is left of it); after that it is never signalled
	// again (on Windows its pid would name whatever process has it next).
	mu       sync.Mutex
	stops    int  // stop paths under way: see hold
	waited   bool // wait has returned
	released bool
}

// newProcess makes the command of run runID, not yet started: exe with
// spec's arguments, in spec's root, with its pipes as opts say. For a
// process that ends with its call (opts.endsWithCall), ctx is that
// call's, and cancelled is told why it ended before the group is killed.
func newProcess(ctx context.Context, exe string, spec Spec, runID string, opts kindOptions, cancelled func(cancelReason)) (*process, error) {
	if err := checkCommandLine(exe, spec.Args); err != nil {
		return nil, err
	}
	p := &process{runID: runID, endsWithLeader: opts.endsWithLeader}
	if opts.endsWithCall {
		p.cmd = exec.CommandContext(ctx, exe, spec.Args...)
		p.cmd.Cancel = func() error {
			why := cancelledByClient
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = timedOut
			}
			cancelled(why)
			return p.signal(proc.Kill)
		}
	} else {
		p.cmd = exec.Command(exe, spec.Args...)
	}
	p.cmd.Dir = spec.Root
	p.cmd.Env = append(runEnv(spec.Env), EnvMarker+"="+runID)
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.pipes(opts.machine || opts.callerSpeaks); err != nil {
		return nil, err
	}
	return p, nil
}

// pipes makes the process's stdout and stderr pipes, and its stdin pipe
// when withStdin.
func (p *process) pipes(withStdin bool) (err error) {
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		return err
	}
	if p.endsWithLeader {
		// Not StderrPipe: Wait would close it as soon as the leader exits,
		// losing the last lines, the ones that say why it died.
		if p.stderr, p.stderrW, err = os.Pipe(); err != nil {
			return err
		}
		p.cmd.Stderr = p.stderrW
	} else if p.stderr, err = p.cmd.StderrPipe(); err != nil {
		return err
	}
	if withStdin {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return err
		}
	}
	return nil
}

// start starts the command as the leader of a process group of its own.
func (p *process) start() error {
	err := proc.StartGroup(p.cmd)
	if p.stderrW != nil {
		p.stderrW.Close() // the child has its copy
		if err != nil {
			p.stderr.Close()
		}
	}
	if err != nil {
		return err
	}
	p.pid = p.cmd.Process.Pid
	p.started, _ = proc.StartTime(p.pid) // 0 when unknown: see orphanedGroup
	return nil
}

// wait returns once the process has exited and its output has been read
// (outputRead returns when it has), with cmd.Wait's error. A process
// that ends with its leader loses what the leader started (an analysis
// server) when the leader exits, and only then is its stderr complete.
// Then the group is released, unless a stop holds it.
func (p *process) wait(outputRead func()) error {
	defer p.waitedFor()
	if !p.endsWithLeader {
		outputRead()
		return p.cmd.Wait()
	}
	err := p.cmd.Wait()
	_ = p.signal(proc.Kill)
	outputRead()
	p.stderr.Close()
	return err
}

// signal sends sig to the process's group and to every process that
// left it carrying the run's mark; nothing once the group is released.
// It reads the pid from cmd.Process, which Start set before anything
// could call it (Cancel among them), not from p.pid, set after.
func (p *process) signal(sig proc.Signal) error {
	if p.held != nil {
		return p.held.signal(sig, p.pid, p.started, p.runID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil // what was left of the group ended with its release
	}
	return killTree(p.cmd.Process.Pid, p.runID, sig)
}

// hold keeps the group from being released until unhold, while a stop
// signals it: a stop that began before the leader's exit ends what is
// left of the group after it.
func (p *process) hold() {
	p.mu.Lock()
	p.stops++
	p.mu.Unlock()
}

// unhold ends a hold; the last one releases a group whose leader has
// been waited for.
func (p *process) unhold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stops--
	p.releaseLocked()
}

// waitedFor records that wait has returned, and releases the group
// unless a stop holds it.
func (p *process) waitedFor() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waited = true
	p.releaseLocked()
}

// releaseLocked frees what the operating system keeps for the group
// (see proc.Release) once the leader has been waited for and no stop
// holds it. p.mu is held.
func (p *process) releaseLocked() {
	if p.released || !p.waited || p.stops > 0 {
		return
	}
	p.released = true
	proc.Release(p.pid) // a held one's: flyd's copy of its job (Windows)
}

// alive reports whether the leader has not exited (a zombie has). A held
// one is not flyd's child: its start time tells it from a process that
// took its pid since.
func (p *process) alive() bool {
	ok, _ := proc.Alive(p.pid) // an error: it cannot be told, and waiting is all that is left
	if ok && p.held != nil && p.started != 0 {
		start, _ := proc.StartTime(p.pid)
		return start == p.started
	}
	return ok
}

// hasInput reports whether flyd can write to the process's stdin.
func (p *process) hasInput() bool {
	if p.held != nil {
		return true // through its holder, while there is one
	}
	return p.stdin != nil
}

// writeInput writes b to the process's stdin: a --machine request.
func (p *process) writeInput(b []byte) error {
	if p.held != nil {
		return p.held.writeInput(b)
	}
	if p.stdin == nil {
		return ErrRunEnded
	}
	_, err := p.stdin.Write(b)
	return err
}

// closeInput closes the process's stdin, if it has one (a held one's
// closes with its holder).
func (p *process) closeInput() {
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// closeOutputs closes the read ends of the process's output, which ends
// its readers whoever else holds the write ends. A holder does so itself,
// a while after the leader's exit.
func (p *process) closeOutputs() {
	if p.held != nil {
		return
	}
	_ = p.stdout.Close()
	_ = p.stderr.Close()
}

// exitCode is the leader's exit code; -1 if it was killed by a signal,
// never waited for, or ended while nobody held it.
func (p *process) exitCode() int {
	if p.held != nil {
		if x := p.held.exitInfo(); x != nil {
			return x.Code
		}
		return -1
	}
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// exitDescription says how the leader ended, given wait's error:
// "exit code 1", "killed by killed".
func (p *process) exitDescription(waitErr error) string {
	if p.held != nil {
		if x := p.held.exitInfo(); x != nil {
			return x.Desc
		}
		return p.held.goneWhy()
	}
	ps := p.cmd.ProcessState
	if ps == nil {
		if waitErr != nil {
			return waitErr.Error()
		}
		return "unknown exit"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}

// heldProcess is a process its holder owns (internal/holder): flyd's
// connection to the holder, and what flyd knows of it. The connection
// comes and goes (flyd restarts, a reconnect); the holder may die and
// leave the app running (degraded), or speak no version this flyd does
// (logs only): then flyd signals the group itself.
type heldProcess struct {
	dir     string      // the run's directory
	control string      // the holder's endpoint
	holder  holder.Proc // the holder process

	mu       sync.Mutex
	conn     *holder.Conn  // nil while there is none
	changed  chan struct{} // closed and replaced when conn or mode changes
	mode     heldMode
	why      string       // why it is degraded or logs only
	exit     *holder.Exit // how the child ended, once known
	detached chan struct{}
	letGo    bool // detached is closed: flyd lets go of it (Close)

	// The run's reader's only (held.go): the newest record taken, what
	// was acknowledged and when.
	last, acked uint64
	ackedAt     time.Time
	readable    bool // its spool is of a format this flyd reads
	spoolFull   bool // its holder said its spool is full, and not yet that it has room
	// At a take-back: the newest seq a flyd that died showed followers,
	// and flyd's note of the take-back, held until the log is past it.
	shown   uint64
	pending string
}

// heldMode is how flyd has a held process.
type heldMode int

const (
	heldLive     heldMode = iota // through its holder (or reconnecting to it)
	heldDegraded                 // its holder is gone; the app may live on
	heldLogsOnly                 // its holder lives but speaks no version this flyd does
)

func newHeld(dir, control string, h holder.Proc, conn *holder.Conn) *heldProcess {
	return &heldProcess{dir: dir, control: control, holder: h, conn: conn, changed: make(chan struct{}),
		detached: make(chan struct{}), readable: true}
}

// startHeld starts spec's command (exe) under a holder of its own, in a
// directory of its own under hc.Dir, and connects to it.
func startHeld(hc *Holders, exe string, spec Spec, runID string) (*process, error) {
	if err := checkCommandLine(exe, spec.Args); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(exe) {
		abs, err := exec.LookPath(exe)
		if err == nil {
			abs, err = filepath.Abs(abs)
		}
		if err != nil {
			return nil, err
		}
		exe = abs
	}
	if err := owner.MkdirPrivate(hc.Dir); err != nil {
		return nil, fmt.Errorf("make the runs' directory: %w", err)
	}
	dir := filepath.Join(hc.Dir, runID)
	if err := owner.MkdirPrivate(dir); err != nil {
		return nil, fmt.Errorf("make the run's directory: %w", err)
	}
	control := hc.Control(runID, dir)
	mark := EnvMarker + "=" + runID
	st, err := holder.Start(context.Background(), hc.Exe, holder.Spec{Run: runID, Dir: dir, Control: control, Path: exe,
		Args: append([]string{exe}, spec.Args...), Cwd: spec.Root, Env: append(runEnv(spec.Env), mark), Stdin: true, Mark: mark})
	if err != nil {
		_ = holder.Remove(dir)
		return nil, err
	}
	// On Windows flyd keeps a copy of the run's job: the app outlives
	// a holder that dies while this flyd lives, and this flyd can still
	// end it (degraded); at flyd's own end the copy closes with it.
	shareErr := proc.ShareGroup(st.Child.PID, st.Holder.PID, uintptr(st.Job))
	conn, err := holder.Dial(context.Background(), control, runID, 0)
	if err != nil {
		_ = killTree(st.Child.PID, runID, proc.Kill)
		_ = proc.SignalProcess(st.Holder.PID, proc.Kill)
		holder.Reap(st.Holder.PID)
		proc.Release(st.Child.PID)
		_ = holder.Remove(dir)
		return nil, err
	}
	p := &process{held: newHeld(dir, control, st.Holder, conn), runID: runID, pid: st.Child.PID, started: st.Child.Start}
	if shareErr != nil {
		p.held.why = shareErr.Error()
	}
	return p, nil
}

// current returns the holder's connection, nil while there is none, and
// the channel closed at the next change.
func (h *heldProcess) current() (*holder.Conn, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn, h.changed
}

// setConn makes c (nil: none) the connection, or mode and why the way
// flyd has the process, and wakes who waits for either.
func (h *heldProcess) set(c *holder.Conn, mode heldMode, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.letGo && c != nil {
		c.Close() // flyd let go meanwhile: the reader finds it closed, and leaves
	}
	h.conn, h.mode, h.why = c, mode, why
	close(h.changed)
	h.changed = make(chan struct{})
}

// state is the mode and why.
func (h *heldProcess) state() (heldMode, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mode, h.why
}

// heldWait bounds how long a write to a held process waits for its
// holder's connection (a flyd that has just started, a reconnect).
const heldWait = 5 * time.Second

// writeInput sends b to the process's stdin through its holder, waiting
// a while for a connection.
func (h *heldProcess) writeInput(b []byte) error {
	t := time.NewTimer(heldWait)
	defer t.Stop()
	for {
		c, changed := h.current()
		mode, why := h.state()
		switch {
		case mode != heldLive:
			return fmt.Errorf("%w: %s", errNoHolder, why)
		case c != nil:
			return c.Stdin(b)
		}
		select {
		case <-changed:
		case <-t.C:
			return fmt.Errorf("%w: flyd is reconnecting to it", errNoHolder)
		case <-h.detached:
			return ErrClosed
		}
	}
}

// errNoHolder: what needs the run's holder (its stdin) cannot be done.
var errNoHolder = errors.New("the run's holder cannot take it")

// signal sends sig through the holder, or, with none to ask, to the
// group itself (pid, started at start) and what carries the run's mark.
func (h *heldProcess) signal(sig proc.Signal, pid int, start uint64, runID string) error {
	if c, _ := h.current(); c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Signal(ctx, sig)
		cancel()
		if err == nil {
			return nil
		}
	}
	if gone, err := orphanedGroup(store.Record{PID: pid, PIDStart: start}); err == nil && !gone {
		return nil // nothing of it is left to signal
	}
	return killTree(pid, runID, sig)
}

// exitInfo is how the child ended, once known.
func (h *heldProcess) exitInfo() *holder.Exit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exit
}

// goneWhy is how a child ended that nobody held at its end.
func (h *heldProcess) goneWhy() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.why != "" {
		return h.why + "; its exit code is unknown"
	}
	return "exit code unknown"
}
