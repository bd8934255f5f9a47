package holder

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The spool: segment files of records in the run's directory (see the
// package doc). The holder appends to it and trims it; a connection, or
// a flyd whose holder is gone, reads it.

// segmentHeader starts every segment file.
var segmentHeader = []byte("FLYSPOOL\x00\x00\x00\x01\x00\x00\x00\x00")

// spoolFormat is the format of the spool and the state file.
const spoolFormat = 1

// segmentPrefix names a segment: the prefix and its first seq, in 20 digits.
const segmentPrefix = "spool."

// ErrFormat: a state file or spool of a format this build does not read.
var ErrFormat = errors.New("a holder's files of a format this flyd does not read")

// errSpoolFull is an append's error when the spool holds all that it may.
var errSpoolFull = errors.New("the spool holds all it may until flyd takes some")

func segmentName(first uint64) string { return fmt.Sprintf("%s%020d", segmentPrefix, first) }

// segment is one spool file.
type segment struct {
	path  string
	first uint64 // the seq of its first record
	last  uint64 // of its last record; first-1 while it has none
	size  int64  // bytes of whole records and the header
}

func (s *segment) empty() bool { return s.last < s.first }

// spool is the holder's writer of the spool.
type spool struct {
	dir      string
	segMax   int64 // a segment past this size is followed by a new one
	totalMax int64 // unacknowledged bytes the spool may hold

	mu     sync.Mutex
	segs   []*segment // oldest first; the last is the one written
	f      *os.File   // the last segment, open for writing
	next   uint64     // the seq of the next record
	acked  uint64     // what flyd has committed
	total  int64      // bytes in every segment
	doomed []string   // acknowledged segments not yet removed (Windows: a reader had one open)
	grew   chan struct{}
	room   chan struct{}
	buf    []byte
}

// newSpool creates an empty spool in dir, its first record seq 1.
func newSpool(dir string, segMax, totalMax int64) (*spool, error) {
	s := &spool{dir: dir, segMax: segMax, totalMax: totalMax, next: 1, grew: make(chan struct{}), room: make(chan struct{})}
	if err := s.startSegment(); err != nil {
		return nil, err
	}
	return s, nil
}

// startSegment makes the next segment the one written. s.mu is held (or
// the spool is new).
func (s *spool) startSegment() error {
	seg := &segment{path: filepath.Join(s.dir, segmentName(s.next)), first: s.next, last: s.next - 1, size: int64(len(segmentHeader))}
	f, err := os.OpenFile(seg.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("start a spool segment: %w", err)
	}
	if _, err := f.Write(segmentHeader); err != nil {
		f.Close()
		os.Remove(seg.path)
		return fmt.Errorf("start a spool segment: %w", err)
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f = f
	s.segs = append(s.segs, seg)
	s.total += seg.size
	return nil
}

// append writes recs (their Seq is set here) to the spool, all or none:
// a write that fails part way is cut back to the last whole record. It
// returns the seq of the last one.
func (s *spool) append(recs []Record) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.segs[len(s.segs)-1]
	if !cur.empty() && cur.size >= s.segMax {
		if err := s.startSegment(); err != nil {
			return 0, err
		}
		cur = s.segs[len(s.segs)-1]
	}
	b := s.buf[:0]
	seq := s.next
	for i := range recs {
		recs[i].Seq = seq
		b = AppendRecord(b, recs[i])
		seq++
	}
	s.buf = b
	if s.total+int64(len(b)) > s.totalMax && s.unacked() > 0 {
		return 0, errSpoolFull
	}
	if n, err := s.f.Write(b); err != nil {
		if n > 0 {
			// Cut back to the last whole record: a reader stops at a torn
			// one, and the next try writes it whole.
			if terr := s.f.Truncate(cur.size); terr != nil {
				return 0, fmt.Errorf("write the spool: %w; and cut back the torn record: %v", err, terr)
			}
			if _, serr := s.f.Seek(cur.size, io.SeekStart); serr != nil {
				return 0, fmt.Errorf("write the spool: %w; and seek back: %v", err, serr)
			}
		}
		return 0, fmt.Errorf("write the spool: %w", err)
	}
	cur.size += int64(len(b))
	cur.last = seq - 1
	s.total += int64(len(b))
	s.next = seq
	if len(s.buf) > 1<<20 {
		s.buf = nil // a burst's buffer is not kept
	}
	close(s.grew)
	s.grew = make(chan struct{})
	return seq - 1, nil
}

// unacked is the bytes of records flyd has not acknowledged, roughly (by
// whole segments). s.mu is held.
func (s *spool) unacked() int64 {
	var n int64
	for _, seg := range s.segs {
		if seg.empty() || seg.last > s.acked {
			n += seg.size
		}
	}
	return n
}

// ack records that flyd has committed every record up to seq, and trims
// what it no longer needs: every segment wholly acknowledged, the one
// written too (a new one takes its place), so that room comes back even
// when a file may grow no more.
func (s *spool) ack(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.acked {
		return
	}
	s.acked = min(seq, s.next-1)
	cur := s.segs[len(s.segs)-1]
	if !cur.empty() && cur.last <= s.acked {
		_ = s.startSegment() // if it fails, the old one stays, and is trimmed later
	}
	kept := s.segs[:0]
	for i, seg := range s.segs {
		if i < len(s.segs)-1 && (seg.empty() || seg.last <= s.acked) {
			s.total -= seg.size
			s.doomed = append(s.doomed, seg.path)
			continue
		}
		kept = append(kept, seg)
	}
	clear(s.segs[len(kept):])
	s.segs = kept
	left := s.doomed[:0]
	for _, p := range s.doomed {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			left = append(left, p)
		}
	}
	s.doomed = left
	close(s.room)
	s.room = make(chan struct{})
}

// ackedUpTo is the newest seq flyd has acknowledged.
func (s *spool) ackedUpTo() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// signals returns the channels closed at the next append and the next
// ack.
func (s *spool) signals() (grew, room <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grew, s.room
}

// size is the bytes the spool holds on disk.
func (s *spool) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// close closes the segment being written.
func (s *spool) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// A position in the spool: a segment, by its first seq, and an offset.
type position struct {
	first uint64
	off   int64
}

// locate returns the position of the first record after seq after.
func (s *spool) locate(after uint64) (position, error) {
	s.mu.Lock()
	segs := make([]segment, len(s.segs))
	for i, seg := range s.segs {
		segs[i] = *seg
	}
	s.mu.Unlock()
	for _, seg := range segs {
		if seg.empty() || seg.last <= after {
			continue
		}
		if seg.first > after {
			return position{seg.first, int64(len(segmentHeader))}, nil
		}
		off, err := seekSeq(seg.path, seg.size, after)
		return position{seg.first, off}, err
	}
	cur := segs[len(segs)-1]
	return position{cur.first, cur.size}, nil
}

// seekSeq returns the offset of the first record after seq after in the
// segment at path, of which the first size bytes are whole records.
func seekSeq(path string, size int64, after uint64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := make([]byte, HeaderLen)
	off := int64(len(segmentHeader))
	for off < size {
		if _, err := f.ReadAt(h, off); err != nil {
			return 0, fmt.Errorf("find seq %d in %s: %w", after+1, filepath.Base(path), err)
		}
		n, err := payloadLen(h)
		if err != nil {
			return 0, err
		}
		if be.Uint64(h[12:]) > after {
			return off, nil
		}
		off += HeaderLen + int64(n)
	}
	return off, nil
}

// readAt reads whole records' bytes at p into buf: what is there up to
// the end of what was written. When p's segment is done with (a newer
// one exists and p is at its end), it moves p to the next segment and
// reports moved. n 0 and not moved: nothing more yet.
func (s *spool) readAt(p *position, f **os.File, buf []byte) (n int, moved bool, err error) {
	s.mu.Lock()
	var seg segment
	var next uint64
	found := false
	for i, sg := range s.segs {
		if sg.first == p.first {
			seg, found = *sg, true
			if i+1 < len(s.segs) {
				next = s.segs[i+1].first
			}
			break
		}
	}
	if !found && len(s.segs) > 0 { // trimmed: what it held was acknowledged
		for _, sg := range s.segs {
			if sg.first > p.first {
				next = sg.first
				break
			}
		}
	}
	s.mu.Unlock()
	if !found || p.off >= seg.size {
		if next == 0 {
			return 0, false, nil
		}
		if *f != nil {
			(*f).Close()
			*f = nil
		}
		*p = position{next, int64(len(segmentHeader))}
		return 0, true, nil
	}
	if *f == nil {
		if *f, err = os.Open(seg.path); err != nil {
			return 0, false, err
		}
	}
	want := min(int64(len(buf)), seg.size-p.off)
	n, err = (*f).ReadAt(buf[:want], p.off)
	p.off += int64(n)
	if errors.Is(err, io.EOF) && int64(n) == want {
		err = nil
	}
	return n, false, err
}

// ReadSpool reads the spool in dir, written by a holder that may be gone
// or still writing, and calls fn with each record after seq after, in
// order, until fn returns an error. A record fn gets is valid until it
// returns. It stops at the end of what is whole; torn is true when it
// stopped at a record that is short or damaged (the end of a holder that
// died or failed while writing it). Segments are read in seq order,
// whatever else is in dir.
func ReadSpool(dir string, after uint64, fn func(Record) error) (torn bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read the spool: %w", err)
	}
	var firsts []uint64
	for _, e := range ents {
		if s, ok := strings.CutPrefix(e.Name(), segmentPrefix); ok && len(s) == 20 {
			if n, err := strconv.ParseUint(s, 10, 64); err == nil {
				firsts = append(firsts, n)
			}
		}
	}
	slices.Sort(firsts)
	for i, first := range firsts {
		if i+1 < len(firsts) && firsts[i+1] <= after+1 {
			continue // wholly at or before after
		}
		t, err := readSegment(filepath.Join(dir, segmentName(first)), after, fn)
		if err != nil || t {
			return t, err
		}
	}
	return false, nil
}

// readSegment is ReadSpool for one segment file, read in a bounded
// buffer whatever its size.
func readSegment(path string, after uint64, fn func(Record) error) (torn bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // trimmed while we looked
		}
		return false, fmt.Errorf("read the spool: %w", err)
	}
	defer f.Close()
	h := make([]byte, len(segmentHeader))
	if _, err := io.ReadFull(f, h); err != nil {
		return true, nil // torn in its header: it holds nothing
	}
	if !bytes.Equal(h[:8], segmentHeader[:8]) || be.Uint32(h[8:]) != spoolFormat {
		return false, fmt.Errorf("%w: %s", ErrFormat, filepath.Base(path))
	}
	d := newDecoder(f)
	for {
		r, err := d.next()
		switch {
		case errors.Is(err, io.EOF):
			return false, nil
		case err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrDamaged)):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("read the spool: %w", err)
		case !spoolType(r.Type):
			return true, nil
		case r.Seq <= after:
			continue
		}
		if err := fn(r); err != nil {
			return false, err
		}
	}
}
