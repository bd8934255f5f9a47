package runs

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// seqMarks is a small file, mapped into memory (seqmarks_unix.go), where the runs engine
// keeps the newest seq each live run has published to its ring (and so,
// perhaps, to followers) with one memory store per line. The store
// commits log entries in groups, so a kill -9 of flyd loses the entries
// of the last commit window; but what a process wrote to a shared
// mapping survives its death, so the next flyd reads here exactly how
// many lines were lost, and continues the log right after them, with no
// seq reused and no phantom gap. (A crash of the machine can lose the
// file's pages; then the count is unknown and the log says "up to".)
//
// A slot is 32 bytes: the run id (NUL-padded) and the seq, a
// little-endian uint64 at an 8-byte-aligned offset, written atomically.
type seqMarks struct {
	f   *os.File
	mem []byte

	mu    sync.Mutex
	slots map[string]int // run id → slot
	free  []int
}

const (
	markSlots    = 2048
	markSlotSize = 32
	markIDLen    = 24
)

// openSeqMarks maps the file at path, first reading what a previous flyd
// left in it: the newest published seq of each run that was live.
func openSeqMarks(path string) (*seqMarks, map[string]uint64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open seq marks: %w", err)
	}
	size := markSlots * markSlotSize
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("size seq marks: %w", err)
	}
	mem, err := mapShared(f, size)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("map seq marks: %w", err)
	}
	m := &seqMarks{f: f, mem: mem, slots: make(map[string]int)}
	left := make(map[string]uint64)
	for i := markSlots - 1; i >= 0; i-- {
		slot := mem[i*markSlotSize : (i+1)*markSlotSize]
		if id := string(bytes.TrimRight(slot[:markIDLen], "\x00")); id != "" {
			left[id] = m.load(i)
		}
		clear(slot)
		m.free = append(m.free, i)
	}
	return m, left, nil
}

func (m *seqMarks) word(slot int) *uint64 {
	return (*uint64)(unsafe.Pointer(&m.mem[slot*markSlotSize+markIDLen]))
}

func (m *seqMarks) load(slot int) uint64 { return atomic.LoadUint64(m.word(slot)) }

// track gives run id a slot; -1 when every slot is taken (then the run's
// count after a crash is unknown).
func (m *seqMarks) track(id string) int {
	if m == nil || len(id) > markIDLen {
		return -1
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.free) == 0 {
		return -1
	}
	slot := m.free[len(m.free)-1]
	m.free = m.free[:len(m.free)-1]
	m.slots[id] = slot
	atomic.StoreUint64(m.word(slot), 0)
	copy(m.mem[slot*markSlotSize:], id)
	return slot
}

// set records seq as published in slot, unless a higher seq already is
// (a run's two output readers append concurrently).
func (m *seqMarks) set(slot int, seq uint64) {
	if m == nil || slot < 0 {
		return
	}
	w := m.word(slot)
	for {
		old := atomic.LoadUint64(w)
		if seq <= old || atomic.CompareAndSwapUint64(w, old, seq) {
			return
		}
	}
}

// untrack frees the slot of a run whose log is complete in the store.
func (m *seqMarks) untrack(id string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	slot, ok := m.slots[id]
	if !ok {
		return
	}
	delete(m.slots, id)
	clear(m.mem[slot*markSlotSize : (slot+1)*markSlotSize])
	m.free = append(m.free, slot)
}

// close unmaps the file. After a clean stop every run is untracked, so
// the file is all zeros.
func (m *seqMarks) close() {
	if m == nil {
		return
	}
	_ = unmap(m.mem)
	m.f.Close()
}
