package dtd

import (
	"os"
	"strconv"
	"syscall"
)

// ownedAlive reports whether process pid exists and is uid's: its
// /proc directory is owned by the process's real user.
func ownedAlive(pid, uid int) bool {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
