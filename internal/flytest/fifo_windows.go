package flytest

import "testing"

// Mkfifo skips the test: Windows has no FIFO in its file system.
func Mkfifo(t testing.TB, path string) {
	t.Helper()
	t.Skip("Windows has no FIFOs")
}
