package owner

import (
	"os"
	"strconv"
	"syscall"
)

// runs: the /proc directory of a process is owned by its real user.
func (u User) runs(pid int) bool {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == u.uid
}
