package shim

import (
	"io"
	"os"
)

// pollable on Windows returns f as it is: stdin stays a blocking read on
// a thread of its own, the case Pollable documents for what it does not
// make pollable. The two things the poller buys on Unix matter less here:
// the thread handoff per request (measured on Unix, within the noise of
// a named pipe's round trip), and interrupting a read pending when Run
// returns, which flyctl mcp never needs: it exits once Run has returned.
// An overlapped duplicate of the pipe's handle would give both, should a
// long-lived caller of Run come to need them on Windows.
func pollable(f *os.File) (io.Reader, func()) {
	return f, func() {}
}
