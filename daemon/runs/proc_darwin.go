package runs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processStart identifies when process pid started (its kinfo_proc start
// time in microseconds), so that a pid recorded before a crash is only
// signalled if it is still the same process. 0 means unknown.
func processStart(pid int) uint64 {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return 0
	}
	tv := kp.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec)
}

// groupAlive reports whether any process is left in the process group
// pgid.
func groupAlive(pgid int) bool {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	return err == nil && len(procs) > 0
}

// setSubreaper: macOS has no subreapers.
func setSubreaper() error { return errNoSubreaper }

var errNoSubreaper = errors.New("macOS has no child subreaper")

// childProcesses: without a subreaper there are no adopted children.
func childProcesses(zombies bool) []int { return nil }

// markedProcesses: macOS does not let a process read another's
// environment cheaply; only the process group is stopped there.
func markedProcesses(id string) []int { return nil }

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && kp.Proc.P_stat == 5 // SZOMB
}
