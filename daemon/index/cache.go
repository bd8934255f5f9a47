package index

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/fly-dev/fly/internal/sysmem"
)

// cacheMaxFile: larger files are read each time, never kept.
const cacheMaxFile = 256 << 10

// Cache is the budget of the content caches of one flyd's indexes: what
// all of them keep of file contents (see contentCache) is within it.
type Cache struct {
	limit     int64
	readAhead bool
	used      atomic.Int64
}

// NewCache returns a budget of limit bytes; at most 0 keeps nothing.
// With readAhead, each index's warmer reads its files into the cache
// while nothing searches, once the index has been searched (warm.go);
// without, only what searches read is kept.
func NewCache(limit int64, readAhead bool) *Cache {
	return &Cache{limit: max(limit, 0), readAhead: readAhead}
}

// DefaultCacheBytes is the budget a flyd's indexes share by default: a
// 128th of the machine's memory, at most 64 MiB (32 MiB when the memory
// cannot be read), so that a small machine keeps less.
func DefaultCacheBytes() int64 {
	const most = 64 << 20
	if n := sysmem.Total(); n > 0 {
		return int64(min(n/128, most))
	}
	return most / 2
}

// Limit is the budget in bytes.
func (c *Cache) Limit() int64 { return c.limit }

// Used is the bytes kept now, across the indexes.
func (c *Cache) Used() int64 { return c.used.Load() }

// take reserves n bytes of the budget (n < 0 gives back), if it has
// them; a budget of nothing takes nothing, not even an empty file.
func (c *Cache) take(n int) bool {
	if c.limit == 0 {
		return false
	}
	for {
		u := c.used.Load()
		if u+int64(n) > c.limit {
			return false
		}
		if c.used.CompareAndSwap(u, u+int64(n)) {
			return true
		}
	}
}

func (c *Cache) give(n int) { c.used.Add(-int64(n)) }

// contentCache keeps the contents of files grep has read, so that the
// next search reads memory, not the disk: files of at most cacheMaxFile,
// within the budget it shares with the other indexes (by default one of
// its own). The watcher's goroutine drops what changed
// before it publishes the change (see Index.flush), so an entry is never
// older than the index itself. A read that races with a change is not
// stored: every invalidation moves the epoch, and put refuses contents
// read in an older one.
type contentCache struct {
	budget *Cache // set before the index is used
	mu     sync.Mutex
	epoch  uint64
	bytes  int
	m      map[string][]byte
	closed bool // the index is done with: nothing more is kept
}

// get returns the cached contents of rel and the epoch to pass to put
// after reading it from disk on a miss.
func (c *contentCache) get(rel string) (data []byte, ok bool, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok = c.m[rel]
	return data, ok, c.epoch
}

// put keeps data, read from disk in epoch, if nothing changed since and
// the budget allows. The cache owns data from then on: the caller must
// not change it.
func (c *contentCache) put(rel string, data []byte, epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.putLocked(rel, data, epoch)
}

func (c *contentCache) putLocked(rel string, data []byte, epoch uint64) bool {
	if len(data) > cacheMaxFile || epoch != c.epoch || c.closed {
		return false
	}
	old := c.m[rel] // replaced: only the difference is taken
	if !c.budget.take(len(data) - len(old)) {
		return false
	}
	if c.m == nil {
		c.m = make(map[string][]byte)
	}
	c.m[rel] = data
	c.bytes += len(data) - len(old)
	return true
}

// full reports whether the warmer is done with the budget: what is read
// ahead takes at most half of it, so that what searches read, in any
// workspace, still finds room (nothing is evicted).
func (c *contentCache) full() bool {
	return c.budget.Used() >= c.budget.Limit()/2
}

// getAll returns the cached contents of files (nil where missing) and
// the epoch to pass to keepAll, under one lock.
func (c *contentCache) getAll(files []string) ([][]byte, uint64) {
	out := make([][]byte, len(files))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range files {
		out[i] = c.m[f]
	}
	return out, c.epoch
}

// keepAll keeps data[i] of files[i] for each i of read, under one lock,
// as keep does; the map is made for about hint files at first.
func (c *contentCache) keepAll(files []string, data [][]byte, read []int, epoch uint64, hint int) {
	for _, i := range read {
		if bytes.IndexByte(data[i][:min(len(data[i]), binaryProbe)], 0) >= 0 {
			data[i] = binaryMark
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]byte, hint)
	}
	for _, i := range read {
		if !c.putLocked(files[i], data[i], epoch) {
			return
		}
	}
}

// binaryMark is what the cache keeps of a binary file: one NUL byte,
// which searchData skips as binary without the file being read again.
var binaryMark = []byte{0}

// keep puts what was read of rel in epoch: its contents, or binaryMark
// for a binary file. It reports whether the cache kept it.
func (c *contentCache) keep(rel string, data []byte, epoch uint64) bool {
	if bytes.IndexByte(data[:min(len(data), binaryProbe)], 0) >= 0 {
		data = binaryMark
	}
	return c.put(rel, data, epoch)
}

// drop forgets paths, or everything when all is set.
func (c *contentCache) drop(paths []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if all {
		c.budget.give(c.bytes)
		c.m, c.bytes = nil, 0
		return
	}
	for _, p := range paths {
		if old, ok := c.m[p]; ok {
			c.bytes -= len(old)
			c.budget.give(len(old))
			delete(c.m, p)
		}
	}
}

// close forgets everything, giving its bytes back to the budget, and
// keeps nothing more.
func (c *contentCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.budget.give(c.bytes)
	c.m, c.bytes, c.closed = nil, 0, true
}

// size returns the cached files and bytes.
func (c *contentCache) size() (files, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
