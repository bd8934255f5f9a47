//go:build unix

package shim

import (
	"io"
	"os"
	"syscall"
)

// pollable is Pollable for a pipe or a socket: a non-blocking duplicate
// of f, or f itself if one cannot be made.
func pollable(f *os.File) (io.Reader, func()) {
	nop := func() {}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return f, nop
	}
	syscall.CloseOnExec(fd)
	// O_NONBLOCK belongs to the open file, which the duplicate shares.
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return f, nop
	}
	dup := os.NewFile(uintptr(fd), f.Name()) // pollable: fd is non-blocking
	return dup, func() {
		dup.Close()
		_ = syscall.SetNonblock(int(f.Fd()), false)
	}
}
