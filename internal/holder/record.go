package holder

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// Type says what a record holds.
type Type uint8

// Record types. Stdout, Stderr and Exit are the spool's; Control and
// Stdin travel on the control connection only.
const (
	TypeStdout  Type = 1
	TypeStderr  Type = 2
	TypeExit    Type = 3
	typeControl Type = 32
	typeStdin   Type = 33
)

// Bounds of a record.
const (
	// HeaderLen is the length of a record's header.
	HeaderLen = 28
	// MaxLine is the longest line the holder keeps whole, as flyd's own
	// reader: a longer one is cut to it and flagged, and its rest
	// skipped.
	MaxLine = 8 << 10
	// MaxPayload bounds a record's payload, whoever wrote it.
	MaxPayload = 64 << 10
)

const flagCut = 1 << 0

// Record is one record of the spool or the connection. Data is the
// decoder's until its next call.
type Record struct {
	Type Type
	Cut  bool      // the line was cut at MaxLine
	Seq  uint64    // its place in the spool; 0 on the connection's own frames
	Time time.Time // when the holder read the line
	Data []byte
}

// Errors of a record that cannot be read.
var (
	// ErrShort: the bytes end inside a record (the end of a spool whose
	// writer died or failed in the middle of a record).
	ErrShort = errors.New("torn record: the data ends inside it")
	// ErrDamaged: the record's header or checksum is wrong.
	ErrDamaged = errors.New("damaged record")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var be = binary.BigEndian

// AppendRecord appends r's encoding to dst. A payload over MaxPayload is
// the caller's bug: it panics.
func AppendRecord(dst []byte, r Record) []byte {
	if len(r.Data) > MaxPayload {
		panic(fmt.Sprintf("holder record of %d bytes", len(r.Data)))
	}
	start := len(dst)
	var flags byte
	if r.Cut {
		flags |= flagCut
	}
	var ns int64
	if !r.Time.IsZero() {
		ns = r.Time.UnixNano()
	}
	dst = be.AppendUint32(dst, uint32(len(r.Data)))
	dst = be.AppendUint32(dst, 0) // the checksum, below
	dst = append(dst, byte(r.Type), flags, 0, 0)
	dst = be.AppendUint64(dst, r.Seq)
	dst = be.AppendUint64(dst, uint64(ns))
	dst = append(dst, r.Data...)
	be.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// ParseRecord decodes the record at the start of b and returns it and
// its length. It fails with ErrShort when b ends inside the record, and
// with an error wrapping ErrDamaged when it is not a well-formed record
// of a known type. Data aliases b.
func ParseRecord(b []byte) (Record, int, error) {
	if len(b) < HeaderLen {
		return Record{}, 0, ErrShort
	}
	n, err := payloadLen(b)
	if err != nil {
		return Record{}, 0, err
	}
	if len(b) < HeaderLen+n {
		return Record{}, 0, ErrShort
	}
	r, err := decode(b[:HeaderLen], b[HeaderLen:HeaderLen+n])
	return r, HeaderLen + n, err
}

// payloadLen reads and checks the payload length of the header h.
func payloadLen(h []byte) (int, error) {
	n := be.Uint32(h)
	if n > MaxPayload {
		return 0, fmt.Errorf("%w: a payload of %d bytes (at most %d)", ErrDamaged, n, MaxPayload)
	}
	return int(n), nil
}

// decode checks a whole record (header h, payload p) and decodes it.
func decode(h, p []byte) (Record, error) {
	sum := crc32.Update(crc32.Checksum(h[8:], castagnoli), castagnoli, p)
	if sum != be.Uint32(h[4:]) {
		return Record{}, fmt.Errorf("%w: checksum mismatch", ErrDamaged)
	}
	t, flags := Type(h[8]), h[9]
	switch {
	case t != TypeStdout && t != TypeStderr && t != TypeExit && t != typeControl && t != typeStdin:
		return Record{}, fmt.Errorf("%w: unknown type %d", ErrDamaged, t)
	case flags&^flagCut != 0 || h[10] != 0 || h[11] != 0:
		return Record{}, fmt.Errorf("%w: unknown flags", ErrDamaged)
	}
	r := Record{Type: t, Cut: flags&flagCut != 0, Seq: be.Uint64(h[12:]), Data: p}
	if ns := int64(be.Uint64(h[20:])); ns != 0 {
		r.Time = time.Unix(0, ns)
	}
	return r, nil
}

// spoolType reports whether t is a type the spool holds.
func spoolType(t Type) bool { return t == TypeStdout || t == TypeStderr || t == TypeExit }

// decoder reads records from a stream.
type decoder struct {
	r    *bufio.Reader // its buffer holds the largest record
	held int           // bytes of the last record, still to discard from r
}

func newDecoder(r io.Reader) *decoder {
	return &decoder{r: bufio.NewReaderSize(r, max(256<<10, HeaderLen+MaxPayload))}
}

// next reads the next record; its Data is valid until the next call. An
// end of the stream inside a record is io.ErrUnexpectedEOF.
func (d *decoder) next() (Record, error) {
	if d.held > 0 { // the record returned last, still in the reader's buffer
		_, _ = d.r.Discard(d.held)
		d.held = 0
	}
	h, err := d.r.Peek(HeaderLen)
	if err != nil {
		return Record{}, cutShort(err, len(h))
	}
	n, err := payloadLen(h)
	if err != nil {
		return Record{}, err
	}
	b, err := d.r.Peek(HeaderLen + n) // decoded where the reader holds it: its buffer holds any record
	if err != nil {
		return Record{}, cutShort(err, len(b))
	}
	d.held = len(b)
	return decode(b[:HeaderLen], b[HeaderLen:])
}

// cutShort is a read's error when got bytes of a record came: an end of
// the stream inside a record is io.ErrUnexpectedEOF.
func cutShort(err error, got int) error {
	if got > 0 && errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// buffered reports whether the header of a spool record (not a control
// frame) is already read.
func (d *decoder) buffered() bool {
	if d.r.Buffered()-d.held < HeaderLen {
		return false
	}
	h, _ := d.r.Peek(d.held + HeaderLen) // at hand: it neither blocks nor moves the last record
	return spoolType(Type(h[d.held+8]))
}
