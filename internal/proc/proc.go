// Package proc starts a child as the leader of a process group of its
// own, or detached in a session of its own, and controls the group the
// same way on every operating system: signal the group, signal one
// process, tell whether anything of the group is left and whether a pid
// is still the process that was started, and free the group once done
// with it. daemon/runs starts flutter and the upstream MCP servers with
// it; the shim starts flyd with it. It owns the operating system's calls,
// not what a caller decides to stop or when, nor which processes belong
// to a run.
//
// A group is a process group on Unix, and a job object on Windows
// (proc_windows.go): there it holds every descendant of the leader, none
// may leave it, and it ends with the process that started it.
package proc

import (
	"errors"
	"os/exec"
)

// Signal is what a process is told.
type Signal int

const (
	// Terminate asks the process to end (SIGTERM on Unix): it may clean
	// up first. Windows has no such request for a process without a
	// window: there Terminate ends it at once, as Kill does, and asking
	// first is the caller's (flutter's app.stop).
	Terminate Signal = iota + 1
	// Kill ends the process at once (SIGKILL on Unix, TerminateProcess
	// or TerminateJobObject on Windows).
	Kill
)

// ErrUnsupported is wrapped by what this package cannot do on this
// operating system yet.
var ErrUnsupported = errors.New("not supported on this operating system yet")

// StartGroup starts cmd as the leader of a new process group, whose id
// is the leader's pid: SignalGroup, GroupAlive and Release take that
// pid. On Windows the group is a job object the child is in before it
// runs its first instruction, and cmd.SysProcAttr.CreationFlags gain
// CREATE_SUSPENDED (until then), CREATE_NEW_PROCESS_GROUP and
// CREATE_NO_WINDOW (a console it has, but never shows). When it
// fails after the start, the child is ended and waited for: nothing is
// left, and cmd is not to be waited for again.
func StartGroup(cmd *exec.Cmd) error { return startGroup(cmd) }

// StartDetached starts cmd in a session of its own, without a
// controlling terminal: a daemon that outlives its starter, which a
// signal to the starter's group or terminal does not reach. On Windows:
// no console, a hidden window, a process group of its own, and out of
// the starter's job when that job allows it (else the child ends with
// the job).
func StartDetached(cmd *exec.Cmd) error { return startDetached(cmd) }

// SignalGroup sends sig to every process of the group led by pgid (a
// pid StartGroup started). A group that is gone is not an error. On
// Windows, a pgid this process did not start with StartGroup, or has
// released, is one process: the caller makes sure by its start time
// that it is still the process it means.
func SignalGroup(pgid int, sig Signal) error { return signalGroup(pgid, sig) }

// Release frees what the operating system keeps for the group pgid once
// the caller is done with it: the job object on Windows, whose closing
// ends whatever is left in it; nothing on Unix. The group is not to be
// signalled after it.
func Release(pgid int) { release(pgid) }

// SignalProcess sends sig to the process pid. A process that is gone is
// not an error.
func SignalProcess(pid int, sig Signal) error { return signalProcess(pid, sig) }

// GroupAlive reports whether any process of the group pgid is left. A
// zombie (ended, not yet waited for) does not count. On Windows it is the
// job's count of active processes (for a pgid with no job here, see
// SignalGroup: whether that process is alive).
func GroupAlive(pgid int) (bool, error) { return groupAlive(pgid) }

// Alive reports whether pid is a process that has not ended (a zombie
// has).
func Alive(pid int) (bool, error) { return alive(pid) }

// StartTime identifies when process pid started, in units of the
// operating system's choosing: a pid recorded earlier is the same
// process only if its start time is the same. 0 means there is no such
// process, or its start time is unknown.
func StartTime(pid int) (uint64, error) { return startTime(pid) }

// JobHandle is, on Windows, the handle (in this process) of the job
// object of the group pgid that StartGroup made here, for another
// process to duplicate (ShareGroup); 0 on Unix, and for a group this
// process did not start.
func JobHandle(pgid int) uintptr { return jobHandle(pgid) }

// ShareGroup makes the group pgid, which process owner started with
// StartGroup (job is JobHandle's answer there), this process's to
// signal, to ask about and to release as if it had started it: on
// Windows it duplicates the job's handle into this process, so that the
// job also lives while this process holds it. On Unix a process group is
// named by its id, and there is nothing to do.
func ShareGroup(pgid, owner int, job uintptr) error { return shareGroup(pgid, owner, job) }
