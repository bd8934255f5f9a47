//go:build unix

package loopback

import "syscall"

// fileLimit is the process's soft descriptor limit (1024 if unknown).
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 && rl.Cur < 1<<30 {
		return int(rl.Cur)
	}
	return 1024
}
