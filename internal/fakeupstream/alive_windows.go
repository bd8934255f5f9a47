package fakeupstream

import "os"

// Alive reports whether pid names a process Windows still has: FindProcess
// opens it, which fails once it is gone (or, an approximation, keeps
// working while another handle to an exited process stays open).
func Alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
