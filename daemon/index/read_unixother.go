//go:build unix && !linux

package index

import "golang.org/x/sys/unix"

// fstat and closeFd go through the system's C library where raw system
// calls are not the interface (macOS).

func fstat(fd int, st *unix.Stat_t) error { return unix.Fstat(fd, st) }

func closeFd(fd int) { unix.Close(fd) }
