//go:build unix

package shim

import "os"

// stdinPipe is the pipe a test's relay reads as its stdin, as an editor
// gives one.
func stdinPipe() (r, w *os.File, err error) { return os.Pipe() }
