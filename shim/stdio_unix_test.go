//go:build unix

package shim

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollable: a pipe becomes a reader whose pending read can be
// interrupted (what Run's stop needs), lines still arrive, and restore
// leaves the pipe blocking, as the editor gave it. A regular file is
// returned as it is.
func TestPollable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	in, restore := Pollable(r)
	d, ok := in.(interface{ SetReadDeadline(time.Time) error })
	if !ok || d.SetReadDeadline(time.Now().Add(50*time.Millisecond)) != nil {
		t.Fatalf("Pollable(pipe) = %T: its reads cannot be interrupted", in)
	}
	if _, err := in.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline = %v, want a deadline error", err)
	}
	d.SetReadDeadline(time.Time{})
	w.WriteString("line\n")
	buf := make([]byte, 16)
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "line\n" {
		t.Fatalf("read = %q, %v", buf[:n], err)
	}
	restore()
	if fl, err := unix.FcntlInt(r.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("after restore the pipe's flags are %#x, %v: still non-blocking", fl, err)
	}

	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in, restore := Pollable(f); in != io.Reader(f) {
		t.Errorf("Pollable(regular file) = %v, want the file itself", in)
	} else {
		restore()
	}
}
