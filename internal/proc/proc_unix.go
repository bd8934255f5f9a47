//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

func startGroup(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	return cmd.Start()
}

func startDetached(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	return cmd.Start()
}

// release: a process group is nothing to free.
func release(pgid int) {}

func unixSignal(sig Signal) (syscall.Signal, error) {
	switch sig {
	case Terminate:
		return syscall.SIGTERM, nil
	case Kill:
		return syscall.SIGKILL, nil
	}
	return 0, fmt.Errorf("unknown signal %d", sig)
}

func signalGroup(pgid int, sig Signal) error {
	if pgid <= 0 {
		// kill(0) and kill(-1) would reach this process's own group, or
		// every process the user has.
		return fmt.Errorf("signal process group %d: not a group", pgid)
	}
	return signalPID(-pgid, sig)
}

func signalProcess(pid int, sig Signal) error {
	if pid <= 0 {
		return fmt.Errorf("signal process %d: not a process", pid)
	}
	return signalPID(pid, sig)
}

// signalPID is kill(2): a negative pid names a group.
func signalPID(pid int, sig Signal) error {
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func jobHandle(pgid int) uintptr { return 0 }

func shareGroup(pgid, owner int, job uintptr) error { return nil }
