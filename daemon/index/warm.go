package index

import (
	"context"
	"sync"
)

// Searches after the first should not have to read every file: once a
// workspace has been searched, a warmer reads the served files that
// search left out into the content cache, in path order, one at a time
// (a background task, not a second search), pausing while a search runs
// (which fills the cache itself and should have the machine), until the
// cache's budget is used. A workspace nobody searches keeps no file
// contents: the first search, with the page cache warm, is about as fast
// with the cache empty as with the warmer half done (BenchmarkFirstSearch,
// BenchmarkGrepCold), and reading ahead at once cost every open workspace
// its part of the budget from the moment it opened (BenchmarkClientMemory).

// quiet counts the searches running, and lets the warmer wait until none
// does.
type quiet struct {
	mu   sync.Mutex
	n    int
	done chan struct{} // closed when n drops to 0
}

func (q *quiet) enter() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		q.done = make(chan struct{})
	}
	q.n++
}

func (q *quiet) leave() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n--; q.n == 0 {
		close(q.done)
	}
}

// wait returns once no search runs, or ctx is done.
func (q *quiet) wait(ctx context.Context) {
	q.mu.Lock()
	done, busy := q.done, q.n > 0
	q.mu.Unlock()
	if busy {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// warm fills the content cache until every served file is in it, the
// budget is used up, or ctx is done.
func (x *Index) warm(ctx context.Context) {
	defer close(x.warmDone)
	if !x.cache.budget.readAhead {
		return
	}
	select {
	case <-x.searched:
	case <-ctx.Done():
		return
	}
	var d dirCache
	defer d.close()
	for _, f := range x.Files() {
		x.searches.wait(ctx)
		if ctx.Err() != nil || x.cache.full() {
			return
		}
		if _, ok, epoch := x.cache.get(f.Path); !ok {
			if data, skip := d.read(x.Root(), f.Path, cacheMaxFile); skip == skipNone {
				x.cache.keep(f.Path, data, epoch)
			}
		}
	}
	x.warmed.Store(true)
}
