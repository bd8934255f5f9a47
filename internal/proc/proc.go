// Package proc starts a child as the leader of a process group of its
// own, or detached in a session of its own, and controls the group the
// same way on every operating system: signal the group, signal one
// process, tell whether anything of the group is left and whether a pid
// is still the process that was started. daemon/runs starts flutter and
// the upstream MCP servers with it; the shim starts flyd with it. It owns
// the operating system's calls, not what a caller decides to stop or
// when, nor which processes belong to a run.
package proc

import (
	"errors"
	"os/exec"
)

// Signal is what a process is told.
type Signal int

const (
	// Terminate asks the process to end (SIGTERM on Unix): it may clean
	// up first.
	Terminate Signal = iota + 1
	// Kill ends the process at once (SIGKILL on Unix).
	Kill
)

// ErrUnsupported is wrapped by what this package cannot do on this
// operating system yet.
var ErrUnsupported = errors.New("not supported on this operating system yet")

// StartGroup starts cmd as the leader of a new process group, whose id
// is the leader's pid: SignalGroup and GroupAlive take that pid.
func StartGroup(cmd *exec.Cmd) error { return startGroup(cmd) }

// StartDetached starts cmd in a session of its own, without a
// controlling terminal: a daemon that outlives its starter, which a
// signal to the starter's group or terminal does not reach.
func StartDetached(cmd *exec.Cmd) error { return startDetached(cmd) }

// SignalGroup sends sig to every process of the group led by pgid (a
// pid StartGroup started). A group that is gone is not an error.
func SignalGroup(pgid int, sig Signal) error { return signalGroup(pgid, sig) }

// SignalProcess sends sig to the process pid. A process that is gone is
// not an error.
func SignalProcess(pid int, sig Signal) error { return signalProcess(pid, sig) }

// GroupAlive reports whether any process of the group pgid is left. A
// zombie (ended, not yet waited for) does not count.
func GroupAlive(pgid int) (bool, error) { return groupAlive(pgid) }

// Alive reports whether pid is a process that has not ended (a zombie
// has).
func Alive(pid int) (bool, error) { return alive(pid) }

// StartTime identifies when process pid started, in units of the
// operating system's choosing: a pid recorded earlier is the same
// process only if its start time is the same. 0 means there is no such
// process, or its start time is unknown.
func StartTime(pid int) (uint64, error) { return startTime(pid) }
