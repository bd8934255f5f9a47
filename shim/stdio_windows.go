package shim

import (
	"io"
	"os"
)

// pollable on Windows returns f as it is: stdin stays a blocking read on
// a thread of its own, the case Pollable documents for what it does not
// make pollable. Of the two things the poller buys on Unix, this costs a
// thread handoff per request, and gives up interrupting a read pending
// when Run returns, which flyctl mcp never needs: it exits once Run has
// returned.
// An overlapped duplicate of the pipe's handle would give both, should a
// long-lived caller of Run come to need them on Windows.
func pollable(f *os.File) (io.Reader, func()) {
	return f, func() {}
}
