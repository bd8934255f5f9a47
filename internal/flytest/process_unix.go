//go:build unix

package flytest

import "syscall"

// Exists reports whether process pid exists (a zombie too): signal 0.
func Exists(pid int) bool { return syscall.Kill(pid, 0) == nil }
