package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrCorrupt is wrapped by the errors of a file that is damaged: cut
// short, overwritten, or with pages that do not hold together. Open moves
// such a file aside and starts a new one; see Options.
var ErrCorrupt = errors.New("store file is damaged")

// keyDirty, in the meta bucket, is set while a flyd has the file open and
// deleted by Close: finding it at Open means the last flyd did not shut
// down cleanly, so the file is checked page by page.
var keyDirty = []byte("dirty")

// The layout of a bbolt meta page (bbolt's internal/common, file format
// version 2), read here without mapping the file: a page header of 16
// bytes, then magic, version, page size, flags (4 bytes each), the root
// bucket (16), the freelist page id (8), the high-water page id (8), the
// transaction id (8) and a FNV-64a checksum of what precedes it.
const (
	pageHeaderLen  = 16
	metaMagic      = 0xED0CDAED
	metaVersion    = 2
	metaSumOffset  = 56 // of the checksum, from the start of the meta
	metaPgidOffset = 40
	metaTxidOffset = 48
	metaLen        = 64
)

// checkFile looks at the file's meta pages before bbolt maps it: bbolt
// trusts them, and a file shorter than they say makes it fault on a page
// past the end (a SIGBUS that no recover catches). A missing or empty
// file is fine: Open creates it.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	var best *fileMeta
	var firstErr error
	// The second meta page sits one page in; the page size is the first
	// valid meta's, else the OS page size (what bbolt would have used).
	offsets := []int64{0}
	for _, off := range offsets {
		m, err := readMeta(f, off)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
		} else if best == nil || m.txid > best.txid {
			best = &m
		}
		if off == 0 {
			ps := int64(os.Getpagesize())
			if err == nil {
				ps = int64(m.pageSize)
			}
			offsets = append(offsets, ps)
		}
	}
	if best == nil {
		return fmt.Errorf("%w: no valid meta page (%v)", ErrCorrupt, firstErr)
	}
	if need := int64(best.pgid) * int64(best.pageSize); size < need {
		return fmt.Errorf("%w: it is %d bytes, but its meta page says it holds %d (cut short: a full disk or an unfinished copy?)", ErrCorrupt, size, need)
	}
	return nil
}

type fileMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

func readMeta(r io.ReaderAt, off int64) (fileMeta, error) {
	b := make([]byte, pageHeaderLen+metaLen)
	if _, err := r.ReadAt(b, off); err != nil {
		return fileMeta{}, fmt.Errorf("read meta page at %d: %w", off, err)
	}
	m := b[pageHeaderLen:]
	le := binary.LittleEndian // bbolt writes native order; flyd's platforms are little-endian
	switch {
	case le.Uint32(m[0:]) != metaMagic:
		return fileMeta{}, fmt.Errorf("meta page at %d: not a bbolt file", off)
	case le.Uint32(m[4:]) != metaVersion:
		return fileMeta{}, fmt.Errorf("meta page at %d: format version %d", off, le.Uint32(m[4:]))
	}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	if h.Sum64() != le.Uint64(m[metaSumOffset:]) {
		return fileMeta{}, fmt.Errorf("meta page at %d: checksum mismatch", off)
	}
	fm := fileMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[metaPgidOffset:]), txid: le.Uint64(m[metaTxidOffset:])}
	if fm.pageSize < 1024 || fm.pageSize&(fm.pageSize-1) != 0 {
		return fileMeta{}, fmt.Errorf("meta page at %d: page size %d", off, fm.pageSize)
	}
	return fm, nil
}

// guard runs fn, turning a panic or a memory fault inside it (bbolt
// reading a damaged page of the mapped file) into an ErrCorrupt error.
func guard(what string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, what, r)
		}
	}()
	return fn()
}

// verify reads every bucket and key of the file, decoding what this
// package stored, and then lets bbolt check that every page is accounted
// for. Reading goes first, on this goroutine under guard: bbolt's own
// check runs on a goroutine of its own, where a fault on a damaged page
// could not be recovered.
func verify(b *bolt.DB) error {
	err := guard("read every page", func() error {
		return b.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
				return walkBucket(bk)
			})
		})
	})
	if err != nil {
		return err
	}
	return guard("check page accounting", func() error {
		return b.View(func(tx *bolt.Tx) error {
			var errs []error
			for err := range tx.Check() {
				if len(errs) < 5 {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(errs...))
			}
			return nil
		})
	})
}

// walkBucket reads every key and value under bk, byte by byte: a value
// on a damaged page faults or panics here, under guard, rather than in a
// later read.
func walkBucket(bk *bolt.Bucket) error {
	var sum byte
	err := bk.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := bk.Bucket(k); sub != nil {
				return walkBucket(sub)
			}
			return nil
		}
		for _, c := range k {
			sum ^= c
		}
		for _, c := range v {
			sum ^= c
		}
		return nil
	})
	runtime.KeepAlive(sum) // the reads must happen
	return err
}

// openBoltChecked opens the file, refusing one whose meta pages do not
// match it, and checks it page by page when the last flyd did not close
// it. Errors of a damaged file wrap ErrCorrupt.
func openBoltChecked(path string, timeout time.Duration) (*bolt.DB, bool, error) {
	if err := checkFile(path); err != nil {
		return nil, false, err
	}
	var b *bolt.DB
	err := guard("open", func() error {
		var err error
		b, err = openBolt(path, timeout)
		return err
	})
	if err != nil {
		if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return nil, false, err
	}
	var dirty bool
	err = guard("read the meta bucket", func() error {
		return b.View(func(tx *bolt.Tx) error {
			if m := tx.Bucket(bucketMeta); m != nil {
				dirty = m.Get(keyDirty) != nil
			}
			return nil
		})
	})
	if err == nil && dirty {
		err = verify(b)
	}
	if err != nil {
		b.Close()
		return nil, dirty, err
	}
	return b, dirty, nil
}
