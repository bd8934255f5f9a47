//go:build unix

package runs

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapShared maps the first size bytes of f into memory, shared: what is
// stored there reaches the file even if this process dies.
func mapShared(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func unmap(mem []byte) error { return unix.Munmap(mem) }
