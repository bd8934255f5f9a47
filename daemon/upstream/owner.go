package upstream

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a config file that another user owns or can write:
// whoever can write it decides what flyd runs.
func checkOwner(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you: flyd will not run what it says", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v): flyd will not run what it says; chmod go-w it", path, fi.Mode().Perm())
	}
	return nil
}
