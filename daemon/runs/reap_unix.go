//go:build unix

package runs

import "syscall"

// reapZombie waits for the child pid, which has exited, without
// blocking.
func reapZombie(pid int) error {
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return err
}
