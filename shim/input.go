package shim

import (
	"bufio"
	"io"
	"time"
)

// line is one line of stdin, or its end.
type line struct {
	b   []byte // without its line ending; nil with err
	err error  // io.EOF at the end, or the read error; b is then nil
}

// input reads stdin on its own goroutine so that the session can wait for
// a line, the daemon and ctx at once. It hands over each non-blank line
// in a buffer the session gives back with recycle; two buffers circulate,
// so it reads one line ahead.
type input struct {
	r     io.Reader
	lines chan line     // unbuffered; the last value carries err
	free  chan []byte   // buffers to read into
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when the goroutine ends
}

// startInput starts reading r. The caller must call stop.
func startInput(r io.Reader) *input {
	in := &input{
		r:     r,
		lines: make(chan line),
		free:  make(chan []byte, 2),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	in.free <- nil
	in.free <- nil
	// Owner: stop waits for done (see Run for a Read that cannot be
	// interrupted).
	go in.run()
	return in
}

func (in *input) run() {
	defer close(in.done)
	br := bufio.NewReaderSize(in.r, 64<<10)
	for {
		var buf []byte
		select {
		case buf = <-in.free:
		case <-in.quit:
			return
		}
		b, err := readLine(br, buf[:0])
		b = trimEOL(b)
		var l line
		switch {
		case err != nil:
			l.err = err
			if !isBlank(b) {
				// Hand over the last line first, then the end.
				select {
				case in.lines <- line{b: b}:
				case <-in.quit:
					return
				}
			}
		case isBlank(b):
			in.free <- b
			continue
		default:
			l.b = b
		}
		select {
		case in.lines <- l:
		case <-in.quit:
			return
		}
		if l.err != nil {
			return
		}
	}
}

// readLine appends the next line of br, with its "\n", to buf. It has no
// length limit. err is non-nil only when the input ended or failed; the
// returned bytes are then the unterminated rest.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// recycle gives a line's buffer back for reading the next one.
func (in *input) recycle(b []byte) {
	if cap(b) > keepBuffer {
		b = nil
	}
	select {
	case in.free <- b:
	default: // unreachable: at most two buffers circulate
	}
}

// stop ends the reading goroutine. If it is blocked in a Read, stop
// interrupts it with a read deadline when the reader supports one and
// waits; otherwise it leaves the goroutine to end with that Read.
func (in *input) stop() {
	close(in.quit)
	select {
	case <-in.done:
		return
	default:
	}
	d, ok := in.r.(interface{ SetReadDeadline(time.Time) error })
	if !ok || d.SetReadDeadline(time.Now()) != nil {
		return
	}
	<-in.done
	d.SetReadDeadline(time.Time{})
}
