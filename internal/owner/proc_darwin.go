package owner

import "golang.org/x/sys/unix"

// runs asks the kernel's process table.
func (u User) runs(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && int(kp.Eproc.Ucred.Uid) == u.uid
}
