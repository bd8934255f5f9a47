//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// held is process pid as os.FindProcess finds it: on Linux with a pidfd
// where the kernel has them, which keeps naming that process whatever
// later has its pid; elsewhere the bare pid. The caller releases it.
func held(pid int) *os.Process {
	p, _ := os.FindProcess(pid) // never an error on Unix
	return p
}

func signalIfStarted(pid int, start uint64, sig Signal) error {
	if pid <= 0 {
		return fmt.Errorf("signal process %d: not a process", pid)
	}
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	p := held(pid)
	defer p.Release()
	// With a pidfd taken first, a start time read that matches proves the
	// pidfd names that process, or one that has ended (which the signal
	// then does not reach).
	if now, _ := startTime(pid); start == 0 || now != start {
		return nil
	}
	if err := p.Signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}

func signalGroupIfStarted(pgid int, start uint64, sig Signal) error {
	if pgid <= 0 {
		return fmt.Errorf("signal process group %d: not a group", pgid)
	}
	if _, err := unixSignal(sig); err != nil {
		return err
	}
	p := held(pgid)
	defer p.Release()
	now, _ := startTime(pgid)
	if now != 0 && (start == 0 || now != start) {
		// Another process has the pid: the group the recorded leader led
		// has ended, since its id was no new process's while it had
		// members. (With start 0, the leader cannot be told from another
		// process: it is left alone too.)
		return nil
	}
	if now != 0 && p.Signal(syscall.Signal(0)) == nil {
		// The leader, alive or a zombie, held (on Linux) by its pidfd:
		// its pid is no other process's, and names its group.
		return signalGroup(pgid, sig)
	}
	// The leader has ended. What is left of its group, if anything,
	// keeps its id from every new process; a process that has the pid
	// now (the group ended, and the pid was given again) is not reached.
	if left, err := groupAlive(pgid); err != nil || !left {
		return err
	}
	if again, _ := startTime(pgid); again != 0 {
		return nil
	}
	return signalGroup(pgid, sig)
}
