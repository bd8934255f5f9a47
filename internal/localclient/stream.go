package localclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine bounds one line of a Stream. flyd cuts a log entry at 8 KiB
// and an error's text at less; the bound is far above what flyd sends.
const MaxLine = 16 << 20

// A Stream is an open NDJSON answer of flyd (a run's log, a run's errors
// as they come): one JSON document per line, read in order with Next or
// NextRaw. The caller closes it; cancelling the context of the call that
// opened it ends a read in progress.
type Stream[T any] struct {
	body io.ReadCloser
	br   *bufio.Reader
	line []byte
}

func newStream[T any](body io.ReadCloser) *Stream[T] {
	return &Stream[T]{body: body, br: bufio.NewReaderSize(body, 64<<10)}
}

// NextRaw returns the next line as flyd sent it, without its newline;
// the slice is valid until the next call. At the end of the stream it
// returns io.EOF, or io.ErrUnexpectedEOF when the stream was cut inside a
// line (which is dropped); another read error, such as the context's, is
// returned as the body's read gave it.
func (s *Stream[T]) NextRaw() ([]byte, error) {
	s.line = s.line[:0]
	for {
		b, err := s.br.ReadSlice('\n')
		s.line = append(s.line, b...)
		switch {
		case len(s.line) > MaxLine:
			return nil, fmt.Errorf("flyd sent a line over %d bytes", MaxLine)
		case err == nil:
			return s.line[:len(s.line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.line) > 0:
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
}

// Next reads the next line and decodes it; its errors are NextRaw's, or
// one that quotes the start of a line that is not a T.
func (s *Stream[T]) Next() (T, error) {
	var v T
	b, err := s.NextRaw()
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("flyd sent a malformed line %.100q: %w", b, err)
	}
	return v, nil
}

// Buffered is the number of bytes of further lines already read: a
// printer flushes its output when there are none, rather than after
// every line.
func (s *Stream[T]) Buffered() int { return s.br.Buffered() }

// Close closes the answer's body.
func (s *Stream[T]) Close() error { return s.body.Close() }
