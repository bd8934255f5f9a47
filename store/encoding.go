package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// How a run's log is stored in its bucket: the value of its LogMeta
// counters, and the value of each entry.

// LogMeta is stored as a version byte and big-endian uint64s: five in
// version 1, and Mark as a sixth in version 2, which a file of version 1
// reads as 0.
const (
	logMetaLen   = 1 + 5*8
	logMetaLenV2 = 1 + 6*8
)

func (m LogMeta) encode() []byte {
	v := make([]byte, 1, logMetaLenV2)
	v[0] = 2
	for _, n := range []uint64{m.FirstSeq, m.LastSeq, m.Entries, m.Bytes, m.Dropped, m.Mark} {
		v = be.AppendUint64(v, n)
	}
	return v
}

func readLogMeta(b *bolt.Bucket) (LogMeta, error) {
	v := b.Get(keyLogMeta)
	if v == nil {
		return LogMeta{}, nil
	}
	if len(v) < logMetaLen || v[0] < 1 || v[0] > 2 || (v[0] == 2 && len(v) < logMetaLenV2) {
		return LogMeta{}, fmt.Errorf("malformed log meta %x", v)
	}
	m := LogMeta{
		FirstSeq: be.Uint64(v[1:]),
		LastSeq:  be.Uint64(v[9:]),
		Entries:  be.Uint64(v[17:]),
		Bytes:    be.Uint64(v[25:]),
		Dropped:  be.Uint64(v[33:]),
	}
	if v[0] == 2 {
		m.Mark = be.Uint64(v[41:])
	}
	return m, nil
}

// An entry's value (its seq is the key) is:
//
//	flags   1 byte: bit 0 set when the text was cut
//	stream  1 byte: 1 stdout, 2 stderr, 3 event, 4 fly, 0 other
//	time    8 bytes: unix nanoseconds, big-endian
//	[name]  for stream 0 only: uvarint length, then the stream's name
//	text    the rest
const (
	entryHeaderLen = 10
	flagTruncated  = 1 << 0
)

var streamCodes = map[string]byte{"stdout": 1, "stderr": 2, "event": 3, "fly": 4}
var streamNames = [...]string{1: "stdout", 2: "stderr", 3: "event", 4: "fly"}

func encodedLen(e Entry) int {
	n := entryHeaderLen + len(e.Text)
	if streamCodes[e.Stream] == 0 {
		n += binary.MaxVarintLen64 + len(e.Stream)
	}
	return n
}

func appendEntry(dst []byte, e Entry) []byte {
	var flags byte
	if e.Truncated {
		flags |= flagTruncated
	}
	code := streamCodes[e.Stream]
	dst = append(dst, flags, code)
	dst = be.AppendUint64(dst, uint64(e.Time.UnixNano()))
	if code == 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Stream)))
		dst = append(dst, e.Stream...)
	}
	return append(dst, e.Text...)
}

// decodeEntry copies the entry at k, v out of the transaction.
func decodeEntry(k, v []byte) (Entry, error) {
	seq := be.Uint64(k)
	if len(v) < entryHeaderLen {
		return Entry{}, fmt.Errorf("decode log entry %d: %d bytes is too short", seq, len(v))
	}
	e := Entry{
		Seq:       seq,
		Truncated: v[0]&flagTruncated != 0,
		Time:      time.Unix(0, int64(be.Uint64(v[2:]))),
	}
	rest := v[entryHeaderLen:]
	switch code := v[1]; {
	case code == 0:
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return Entry{}, fmt.Errorf("decode log entry %d: bad stream name", seq)
		}
		e.Stream = string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
	case int(code) < len(streamNames):
		e.Stream = streamNames[code]
	default:
		return Entry{}, fmt.Errorf("decode log entry %d: unknown stream %d", seq, code)
	}
	e.Text = string(rest)
	return e, nil
}

// textLen is the length of the text in an encoded entry, for the Bytes
// counter; a malformed value counts as empty.
func textLen(v []byte) int {
	if len(v) < entryHeaderLen {
		return 0
	}
	n := len(v) - entryHeaderLen
	if v[1] == 0 {
		l, w := binary.Uvarint(v[entryHeaderLen:])
		if w <= 0 || l > uint64(n-w) {
			return 0
		}
		n -= w + int(l)
	}
	return n
}
