package runs

import (
	"context"

	"github.com/fly-dev/fly/internal/proc"
)

// A process a run starts may leave the run's process group (setsid, a
// daemonizing helper) and so escape a signal to the group. Two things
// reach it anyway:
//   - every child gets EnvMarker=<run id> in its environment, which its
//     descendants inherit, and stopping a run signals every process of
//     the user's that carries its marker (Linux: /proc/PID/environ);
//   - with Config.Subreaper, flyd is the child subreaper of everything
//     it starts (Linux), so a descendant orphaned by its parent's exit
//     becomes flyd's child rather than init's: the engine reaps those
//     (they are not runs) and kills whatever is left of them at Close.
// macOS has neither /proc nor subreapers: there, a descendant that
// leaves the process group is not stopped with its run. Windows needs
// neither: a run's group is a job object, which no descendant can leave
// (internal/proc). The operating system's calls are internal/proc's; how
// this process adopts orphans differs in reap_unix.go and reap_windows.go.

// EnvMarker is the variable that names the run a process belongs to.
const EnvMarker = "FLY_RUN_ID"

// killTree signals the process group led by pid and every process marked
// as run id's. A pid that leads no group (0: none recorded) is left
// alone.
func killTree(pid int, id string, sig proc.Signal) error {
	if pid <= 0 {
		return nil
	}
	err := proc.SignalGroup(pid, sig)
	for _, p := range proc.WithEnv(EnvMarker + "=" + id) {
		_ = proc.SignalProcess(p, sig)
	}
	return err
}

// adopt makes this process the subreaper of its descendants, and runs the
// reaper until ctx ends: whenever a child exits it waits for the zombie
// children that are not the leader of a live run (those are their
// exec.Cmd's to wait for).
func (e *Engine) adopt(ctx context.Context) {
	if err := adoptOrphans(ctx, e.reapOrphans); err != nil {
		e.log.Warn("cannot adopt orphaned descendants: a process that leaves its run's group may outlive it", logErr, err)
	}
}

// reapOrphans waits for the zombie children that no exec.Cmd waits for.
// It holds spawn, so no child started by Start is between its start and
// its registration as a run.
func (e *Engine) reapOrphans() {
	e.spawn.Lock()
	defer e.spawn.Unlock()
	leaders := e.leaders()
	for _, pid := range proc.Children(true) {
		if !leaders[pid] {
			_ = proc.Reap(pid)
		}
	}
}

// leaders are the pids of the live runs' leaders that flyd waits for.
func (e *Engine) leaders() map[int]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[int]bool)
	for _, r := range e.liveLocked() {
		if r.proc != nil && r.proc.held != nil {
			// No exec.Cmd of flyd's waits for a held run's leader: it is
			// flyd's child only once its holder died, an orphan like any.
			continue
		}
		r.mu.Lock()
		m[r.rec.PID] = true
		r.mu.Unlock()
	}
	return m
}

// killOrphans kills the adopted descendants that are still alive: at
// Close, once every run that ends with flyd has stopped, nothing of
// theirs outlives it. The holders of the runs flyd lets go of are its
// children too, and are spared.
func (e *Engine) killOrphans() {
	e.spawn.Lock()
	defer e.spawn.Unlock()
	leaders := e.leaders()
	holders := e.holders()
	for _, pid := range proc.Children(false) {
		if !leaders[pid] && !holders[pid] {
			_ = proc.SignalProcess(pid, proc.Kill)
		}
	}
}

// holders are the pids of the holders of the runs in memory.
func (e *Engine) holders() map[int]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[int]bool)
	for _, r := range e.runs {
		if r.proc != nil && r.proc.held != nil {
			m[r.proc.held.holder.PID] = true
		}
	}
	return m
}
