// Package store owns flyd's bbolt file: opening it with a lock timeout, its
// buckets and schema version, the run records, and the persisted log of
// every run, which one writer goroutine commits in groups.
//
// It does not own the in-memory log rings (logring), processes, sessions or
// HTTP (daemon), or where the file lives (internal/paths). Only flyd opens
// the file; flyctl reads runs and logs through flyd.
//
// The file holds, in schema version 1:
//
//	meta/                "schema" → uint64, big-endian
//	runs/                run id → Run, as JSON
//	logs/<run id>/       uint64 seq, big-endian → one encoded Entry
//	logs/<run id>/meta   → LogMeta counters
//
// Every access is an Update or View closure; bytes are copied out before
// the transaction ends, and no read transaction is held across anything
// slow.
package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fly-dev/fly/internal/logkey"
)

// schemaVersion is the layout this package reads and writes. Open migrates
// older files forward and refuses newer ones.
const schemaVersion = 1

// Bucket and key names.
var (
	bucketMeta = []byte("meta")
	bucketRuns = []byte("runs")
	bucketLogs = []byte("logs")
	keySchema  = []byte("schema")
	keyLogMeta = []byte("meta") // in each logs/<run id> bucket; never 8 bytes long, so never a seq
)

// Compaction at Open: a file of at least compactMinSize bytes is rewritten
// when less than half of it holds live pages.
const (
	compactMinSize   = 1 << 20
	compactTxMaxSize = 64 << 20
)

// Log attribute keys.
const (
	logPath   = "path"
	logErr    = logkey.Error
	logBefore = "size_before"
	logAfter  = "size_after"
	logRuns   = "runs"
)

// Options configures Open. The zero value gives the defaults.
type Options struct {
	// LockTimeout bounds the wait for the file's lock. Another process
	// holding it makes Open fail after this long. Default 1s.
	LockTimeout time.Duration

	// KeepRuns is how many finished runs Prune keeps, newest first.
	// Default 100; negative keeps all.
	KeepRuns int

	// MaxAge is how long Prune keeps a finished run after it ended.
	// Default 7 days; negative keeps runs forever.
	MaxAge time.Duration

	// MaxLogEntries and MaxLogBytes bound the persisted log of one run. The
	// writer deletes the oldest entries of a run when either is exceeded.
	// Bytes count entry text. Defaults 100,000 entries and 32 MiB.
	MaxLogEntries int
	MaxLogBytes   int64

	// QueueSize is how many entries Append can hold before the writer
	// commits them. Past it, Append waits for the writer. Default 8192.
	QueueSize int

	// Logger receives compaction and commit failures. Default: discarded.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.KeepRuns == 0 {
		o.KeepRuns = 100
	}
	if o.MaxAge == 0 {
		o.MaxAge = 7 * 24 * time.Hour
	}
	if o.MaxLogEntries <= 0 {
		o.MaxLogEntries = 100_000
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = 32 << 20
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// ErrNotFound is returned, wrapped, by GetRun, Logs, Tail and LogStats for
// a run id that has no record and no log.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by Append and Run after Close.
var ErrClosed = errors.New("store closed")

// DB is flyd's open bbolt file. Its methods are safe for concurrent use.
// Log entries given to Append are committed by the writer, Run; Close
// commits what is left and closes the file.
type DB struct {
	bolt *bolt.DB
	path string
	opts Options
	log  *slog.Logger

	queue chan op
	// batchReady holds a token once the queue holds a whole batch or a
	// Flush barrier: the writer, holding part of a batch, waits for it
	// rather than waking for every entry.
	batchReady chan struct{}
	waits      atomic.Int64 // Appends that found the queue full

	// mu orders Close against Append: once closed is set, no entry is
	// sent on queue. closing is closed first, so that an Append waiting
	// for room lets go of mu.
	mu          sync.RWMutex
	closed      bool
	closing     chan struct{} // closed by Close; stops Run
	closingOnce sync.Once

	// writerMu guards stopped, which is non-nil while Run is the writer and
	// is closed when it has stopped. While stopped is nil, whoever holds
	// writerMu may drain the queue itself (Flush, Close).
	writerMu sync.Mutex
	stopped  chan struct{}

	// The fields below belong to whoever is draining the queue.
	failed   error // first commit error since the last Flush
	failures failureLog

	recovery string // see Recovery

	dropsMu sync.Mutex
	drops   map[string]uint64 // entries Append dropped, by run, not yet committed

	commits      atomic.Int64 // bbolt Updates made for log batches
	beforeCommit func()       // test hook; set before Run starts
}

// Open opens or creates the store at path (mode 0600) and returns it with
// its writer not yet running: start Run. It waits at most
// Options.LockTimeout for the file's lock, then fails with an error that
// says the file is in use.
//
// Open migrates an older schema, refuses a newer one, prunes runs (see
// Prune) and compacts the file when it is mostly free pages. It does not
// touch run states; see MarkInterrupted.
func Open(path string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	db, err := open(path, opts)
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return db, err
	}
	// flyd must start whatever its file holds: keep the damaged file for
	// whoever wants to look at it, and start afresh.
	aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, fmt.Errorf("open store %s: %w; moving it aside failed: %v", path, err, rerr)
	}
	syncDir(filepath.Dir(path))
	opts.Logger.Error("store file was damaged: moved it aside and started a new one; runs and logs from before are only in the moved file",
		logPath, path, "moved_to", aside, logErr, err)
	db, err2 := open(path, opts)
	if err2 != nil {
		return nil, fmt.Errorf("open store %s after moving a damaged one aside: %w", path, err2)
	}
	db.recovery = fmt.Sprintf("%s was damaged (%v); it was moved to %s and flyd started with a new one: runs and logs from before are only in the moved file", path, err, aside)
	return db, nil
}

// open is Open without recovery from damage.
func open(path string, opts Options) (*DB, error) {
	b, dirty, err := openBoltChecked(path, opts.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		return nil, err
	}
	if dirty {
		opts.Logger.Info("store was not closed cleanly; checked every page: it is sound", logPath, path)
	}
	if err := b.Update(migrate); err != nil {
		b.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db := &DB{
		bolt:       b,
		path:       path,
		opts:       opts,
		log:        opts.Logger,
		queue:      make(chan op, opts.QueueSize),
		batchReady: make(chan struct{}, 1),
		closing:    make(chan struct{}),
		drops:      make(map[string]uint64),
		failures:   failureLog{log: opts.Logger, what: "store commit"},
	}
	if n, err := db.Prune(time.Now()); err != nil {
		b.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	} else if n > 0 {
		db.log.Info("pruned old runs", logPath, path, logRuns, n)
	}
	if err := db.compactIfSparse(); err != nil {
		db.bolt.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyDirty, []byte{1}) }); err != nil {
		db.bolt.Close()
		return nil, fmt.Errorf("open store %s: mark in use: %w", path, err)
	}
	return db, nil
}

// Recovery says, when Open found the file damaged and started a new one,
// what happened and where the damaged file went; else "".
func (db *DB) Recovery() string { return db.recovery }

func openBolt(path string, timeout time.Duration) (*bolt.DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		NoSync:       false, // fsync every commit
		FreelistType: bolt.FreelistMapType,
	})
	var pe *fs.PathError
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("open store: %s is in use by another flyd (its lock was not released within %v)", path, timeout)
	case errors.As(err, &pe): // it names the file
		return nil, fmt.Errorf("open store: %w", err)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return b, nil
}

// migrate brings the file to schemaVersion, or fails if it is newer.
func migrate(tx *bolt.Tx) error {
	var version uint64
	if m := tx.Bucket(bucketMeta); m != nil {
		if v := m.Get(keySchema); len(v) == 8 {
			version = be.Uint64(v)
		} else if v != nil {
			return fmt.Errorf("read schema version: malformed value %x", v)
		}
	}
	if version > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this flyd supports (%d): upgrade flyd", version, schemaVersion)
	}
	for ; version < schemaVersion; version++ {
		switch version {
		case 0: // a new file
			for _, name := range [][]byte{bucketMeta, bucketRuns, bucketLogs} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return fmt.Errorf("create bucket %s: %w", name, err)
				}
			}
		}
	}
	v := make([]byte, 8)
	be.PutUint64(v, schemaVersion)
	if err := tx.Bucket(bucketMeta).Put(keySchema, v); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	return nil
}

// compactIfSparse rewrites the file when it is at least compactMinSize and
// less than half of it is live pages: bolt.Compact into a temporary file
// beside it (synced), close the file, replace it with the compacted one,
// reopen. The file is closed before it is replaced because Windows refuses
// to replace a file that is open (or mapped); on Unix the rename is atomic
// either way. A crash at any point leaves either the old file or the
// compacted one, each whole. A failure before the replacement keeps the
// current file, reopened if it was closed, and is only logged.
func (db *DB) compactIfSparse() error {
	fi, err := os.Stat(db.path)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	size := fi.Size()
	if size < compactMinSize {
		return nil
	}
	var hwm int64
	if err := db.bolt.View(func(tx *bolt.Tx) error { hwm = tx.Size(); return nil }); err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	st := db.bolt.Stats()
	live := hwm - int64(st.FreePageN+st.PendingPageN)*int64(db.bolt.Info().PageSize)
	if live*2 >= size {
		return nil
	}

	tmp := db.path + ".compact"
	if err := compactInto(tmp, db.bolt, db.opts.LockTimeout); err != nil {
		os.Remove(tmp)
		db.log.Warn("compaction failed; keeping the file as it is", logPath, db.path, logErr, err)
		return nil
	}
	// Closing drops the file's lock until it is reopened; flyd's
	// instance lock keeps another flyd out meanwhile.
	if err := db.bolt.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close before replacing with the compacted file: %w", err)
	}
	replaced := true
	if err := replaceFile(tmp, db.path); err != nil {
		os.Remove(tmp)
		db.log.Warn("compaction failed; keeping the file as it is", logPath, db.path, logErr, err)
		replaced = false
	}
	b, err := openBolt(db.path, db.opts.LockTimeout)
	if err != nil {
		return fmt.Errorf("reopen after compaction: %w", err)
	}
	db.bolt = b
	if !replaced {
		return nil
	}
	after := size
	if fi, err := os.Stat(db.path); err == nil {
		after = fi.Size()
	}
	db.log.Info("compacted store", logPath, db.path, logBefore, size, logAfter, after)
	return nil
}

func compactInto(tmp string, src *bolt.DB, timeout time.Duration) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{
		Timeout:      timeout,
		NoSync:       true, // one fsync at the end instead of one per commit
		FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := bolt.Compact(dst, src, compactTxMaxSize); err != nil {
		dst.Close()
		return fmt.Errorf("compact into %s: %w", tmp, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return nil
}

// syncDir makes a rename in dir durable, where the OS allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Size returns the file's size in bytes.
func (db *DB) Size() (int64, error) {
	fi, err := os.Stat(db.path)
	if err != nil {
		return 0, fmt.Errorf("store size: %w", err)
	}
	return fi.Size(), nil
}

// Close stops the writer if it is running and waits until it has
// stopped (Run then returns), commits every entry appended before it, and closes the file. It returns
// the first commit error since the last Flush, if any. Appends after Close
// fail with ErrClosed.
func (db *DB) Close() error {
	db.closingOnce.Do(func() { close(db.closing) })
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()

	db.writerMu.Lock()
	stopped := db.stopped
	db.writerMu.Unlock()
	if stopped != nil {
		<-stopped // Run sees closing, commits the queue and returns
	}
	db.writerMu.Lock()
	err := db.drain()
	db.writerMu.Unlock()
	if uerr := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyDirty) }); uerr != nil {
		err = errors.Join(err, fmt.Errorf("mark closed: %w", uerr))
	}
	if cerr := db.bolt.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close %s: %w", db.path, cerr))
	}
	return err
}
