package shim

import (
	"io"
	"sync"
)

// lineWriter writes whole lines to Stdout. Its mutex makes it the one
// writer of Stdout: lines from the read loop and the shim's own replies
// never interleave. After a failed write it fails every later one.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	scratch []byte
	err     error
}

// writeLine writes b and a newline. It blocks while Stdout does.
func (lw *lineWriter) writeLine(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	var err error
	if len(b) < 64<<10 { // one write: one syscall, one pipe chunk
		lw.scratch = append(append(lw.scratch[:0], b...), '\n')
		_, err = lw.w.Write(lw.scratch)
	} else if _, err = lw.w.Write(b); err == nil {
		_, err = lw.w.Write([]byte{'\n'})
	}
	if err != nil {
		lw.err = &errStdout{err}
	}
	return lw.err
}

// writeTerminated writes b, which ends with its newline, in one call.
func (lw *lineWriter) writeTerminated(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	if _, err := lw.w.Write(b); err != nil {
		lw.err = &errStdout{err}
	}
	return lw.err
}

// failed returns the error of the failed write to Stdout, if any.
func (lw *lineWriter) failed() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}
