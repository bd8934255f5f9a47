//go:build unix

package proc

import "syscall"

func reap(pid int) error {
	if pid <= 0 {
		return nil
	}
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return err
}
