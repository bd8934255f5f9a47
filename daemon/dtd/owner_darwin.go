package dtd

import "golang.org/x/sys/unix"

// ownedAlive reports whether process pid exists and is uid's, as the
// kernel's process table says.
func ownedAlive(pid, uid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && int(kp.Eproc.Ucred.Uid) == uid
}
