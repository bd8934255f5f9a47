package shim

import (
	"io"
	"os"
)

// Pollable returns a reader of f for Config.Stdin that waits in the Go
// runtime's poller rather than in a blocking read: when f is a pipe or a
// socket (what an editor gives its MCP server), it is a non-blocking
// duplicate of f. Each client line then wakes the relay from the same
// event loop as flyd's replies, which saves a thread handoff per request,
// and the relay can interrupt a pending read when it returns. Anything
// else (a terminal, a file) is returned as it is: making a terminal
// non-blocking would leak into the shell that shares it. (Unix:
// stdio_unix.go; Windows: stdio_windows.go.)
//
// restore puts f back in blocking mode and closes the duplicate; call it
// once the relay has returned.
func Pollable(f *os.File) (r io.Reader, restore func()) {
	nop := func() {}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, nop
	}
	return pollable(f)
}
