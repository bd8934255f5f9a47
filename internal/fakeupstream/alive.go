package fakeupstream

import "github.com/fly-dev/fly/internal/proc"

// Alive reports whether pid is a process that has not ended: a zombie
// has, and so, on Windows, has a process whose object a handle still
// keeps after its exit.
func Alive(pid int) bool {
	ok, err := proc.Alive(pid)
	return ok && err == nil
}
