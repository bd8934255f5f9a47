package holder

import (
	"bytes"
	"os"
	"time"
)

// The child's pipes: its output read into records and spooled, waiting
// for room while the spool is full, and what flyd sent written to its
// stdin.

// read turns one of the child's outputs into records of lines, spooled
// before anything else sees them: a line over MaxLine is cut to it and
// flagged, its rest skipped. While the spool is full it reads no more,
// and the child blocks on its full pipe.
func (h *holder) read(f *os.File, t Type) {
	buf := make([]byte, 64<<10)
	var (
		line  []byte // the line read so far, at most MaxLine+1 bytes
		skip  bool   // the rest of a cut line is skipped
		recs  []Record
		arena []byte
	)
	emit := func(b []byte, cut bool, now time.Time) {
		start := len(arena)
		arena = append(arena, b...)
		recs = append(recs, Record{Type: t, Cut: cut, Time: now, Data: arena[start:len(arena):len(arena)]})
	}
	for {
		n, err := f.Read(buf)
		now := time.Now()
		for data := buf[:n]; len(data) > 0; {
			i := bytes.IndexByte(data, '\n')
			part := data
			if i >= 0 {
				part, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if !skip {
				room := MaxLine + 1 - len(line) // one more: a \r before the newline
				if len(part) > room {
					line = append(line, part[:room]...)
					emit(line[:MaxLine], true, now)
					line, skip = line[:0], true
				} else {
					line = append(line, part...)
				}
			}
			if i >= 0 {
				if !skip {
					l := bytes.TrimSuffix(line, []byte("\r"))
					if len(l) > MaxLine {
						emit(l[:MaxLine], true, now)
					} else {
						emit(l, false, now)
					}
				}
				line, skip = line[:0], false
			}
		}
		if err != nil && len(line) > 0 && !skip {
			emit(line, false, now) // the last line, without its newline
		}
		if len(recs) > 0 {
			h.spoolWait(recs)
			clear(recs)
			recs, arena = recs[:0], arena[:0]
			if cap(arena) > 1<<20 {
				arena = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// spoolWait appends recs to the spool, waiting as long as it takes for
// room, and returns the last one's seq; 0 when it let them go (see
// abandoned).
func (h *holder) spoolWait(recs []Record) uint64 {
	blocked := false
	told := h.told // stays closed once signalled: waited on once
	for {
		_, room := h.spool.signals()
		seq, err := h.spool.append(recs)
		if err == nil {
			if blocked {
				h.setBlocked(-1, nil)
			}
			if h.dropping.Load() && !h.abandoned() && h.dropping.CompareAndSwap(true, false) {
				h.setBlocked(-1, nil) // a flyd came and made room: the drops' count goes
			}
			return seq
		}
		if !blocked {
			blocked = true
			h.setBlocked(1, err)
		}
		if h.abandoned() {
			// Told to end, and nobody to make room: waiting would keep the
			// holder forever (its readers never end). What the spool holds
			// stays for the next flyd; these records are let go. The drops
			// hold one count of blocked between them, so that the state
			// file says the spool is full until a flyd makes room.
			if h.dropping.CompareAndSwap(false, true) {
				h.log.Printf("told to end with the spool full and no flyd connected: the run's output from here on is not kept (%v)", err)
			} else {
				h.setBlocked(-1, nil)
			}
			return 0
		}
		select {
		case <-room:
		case <-told:
			told = nil // told while a flyd is connected: it makes room, or goes
		case <-time.After(retryFull):
			h.remindFull()
		}
	}
}

// isTold reports whether the holder itself was signalled to end.
func (h *holder) isTold() bool {
	select {
	case <-h.told:
		return true
	default:
		return false
	}
}

// abandoned reports whether the holder was told to end while no flyd is
// connected to take what it holds.
func (h *holder) abandoned() bool {
	if !h.isTold() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn == nil
}

// remindFull tells flyd again that the spool is full: a flyd that has
// taken every record acknowledges them on it, and that makes the room.
func (h *holder) remindFull() {
	h.mu.Lock()
	c, full, why := h.conn, h.full, h.state.Spool
	h.mu.Unlock()
	if c != nil && full {
		_ = c.write(controlRecord(message{T: msgSpool, Full: true, Err: why}))
	}
}

// setBlocked counts a reader that waits for room in the spool (delta 1,
// with why) or got it (-1). While any waits, the spool is full: the
// state file and flyd are told when that changes.
func (h *holder) setBlocked(delta int, why error) {
	h.mu.Lock()
	h.blocked += delta
	full := h.blocked > 0
	if full == h.full {
		h.mu.Unlock()
		return
	}
	h.full = full
	c := h.conn
	h.mu.Unlock()
	m := message{T: msgSpool}
	if full {
		m.Full, m.Err = true, why.Error()
		h.log.Printf("the spool is full, holding the run's output back: %v", why)
	} else {
		h.log.Print("the spool has room again")
	}
	h.saveState(func(s *State) { s.Spool = m.Err })
	if c != nil {
		_ = c.write(controlRecord(m))
	}
}

// writeStdin writes what flyd sent for the child's stdin, in order.
func (h *holder) writeStdin() {
	for {
		select {
		case b := <-h.stdinQ:
			if h.stdin == nil {
				continue
			}
			if _, err := h.stdin.Write(b); err != nil {
				h.log.Printf("the run's stdin: %v", err)
				h.stdin.Close()
				h.stdin = nil
			}
		case <-h.stop:
			if h.stdin != nil {
				h.stdin.Close()
			}
			return
		}
	}
}
