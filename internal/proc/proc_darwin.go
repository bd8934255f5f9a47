package proc

import "golang.org/x/sys/unix"

// The state of a process, from its kinfo_proc.

// startTime is the kinfo_proc start time in microseconds.
func startTime(pid int) (uint64, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return 0, nil
	}
	tv := kp.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec), nil
}

func alive(pid int) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && kp.Proc.P_stat != 5, nil // 5: SZOMB
}

func groupAlive(pgid int) (bool, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	return err == nil && len(procs) > 0, nil
}
