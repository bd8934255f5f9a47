package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fly-dev/fly/internal/proc"
)

// process is a run's operating-system process, and the one place that
// owns it: it makes the command (in the run's root, with the client's
// environment and the run's mark), starts it as the leader of a process
// group of its own, signals that group and what left it (killTree),
// waits for it, says how it ended and releases the group once nothing
// will signal it again (proc.Release: on Windows that closes the run's
// job object, which ends what is left in it). The rest of the engine
// reads the run's output from its pipes and asks it to signal or wait;
// nothing else holds the exec.Cmd or signals a live run's pid (Open
// kills, by their records, the groups a flyd that died left behind).
//
// The issue after the Windows port moves this ownership into a per-run
// holder process that outlives flyd (flyd restarts; the run goes on, and
// the new flyd takes its output and its stdin back from the holder):
// process is the seam that holder replaces, so what touches the child
// belongs here.
type process struct {
	cmd            *exec.Cmd
	runID          string // the value of its mark: see EnvMarker
	endsWithLeader bool   // see kindOptions

	stdin   io.WriteCloser // nil unless the kind writes to it
	stdout  io.ReadCloser  // the engine's to read, or the caller's (kindOptions.callerSpeaks)
	stderr  io.ReadCloser
	stderrW *os.File // the child's end of an engine-made stderr pipe, until the start; nil with StderrPipe

	pid int // once started

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
	proc.Release(p.cmd.Process.Pid)
}

// alive reports whether the leader has not exited (a zombie has).
func (p *process) alive() bool {
	ok, _ := proc.Alive(p.pid) // an error: it cannot be told, and waiting is all that is left
	return ok
}

// closeInput closes the process's stdin, if it has one.
func (p *process) closeInput() {
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// closeOutputs closes the read ends of the process's output, which ends
// its readers whoever else holds the write ends.
func (p *process) closeOutputs() {
	_ = p.stdout.Close()
	_ = p.stderr.Close()
}

// exitCode is the leader's exit code; -1 if it was killed by a signal or
// never waited for.
func (p *process) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// exitDescription says how the leader ended, given wait's error:
// "exit code 1", "killed by killed".
func (p *process) exitDescription(waitErr error) string {
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
