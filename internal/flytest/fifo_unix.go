//go:build unix

package flytest

import (
	"syscall"
	"testing"
)

// Mkfifo makes a FIFO at path, where a test puts one in place of a file
// flyd reads, which must never block it.
func Mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
