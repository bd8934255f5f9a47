package index

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/fsnotify/fsnotify"
)

// maxQueuedBytes bounds the events waiting for Run: past it, events are
// dropped and taken as an overflow (Run rescans, as after one of the
// kernel's). Run takes them every few milliseconds, but applying a batch
// may walk a large new tree meanwhile.
const maxQueuedBytes = 8 << 20

// maxQueuedErrors bounds the watcher's errors (other than an overflow)
// waiting for Run, which only logs them.
const maxQueuedErrors = 16

// watchQueue holds the watcher's events until Run applies them. The
// watcher puts them there as they come, from its own goroutine, and never
// waits on Run: fsnotify's Add and Remove wait for the watcher's goroutine
// that sends the events, and Run adds and removes watches while it applies
// a batch (the build, before Run, adds them all), which would wait on
// itself if the watcher were waiting to hand Run an event.
type watchQueue struct {
	mu       sync.Mutex
	events   []fsnotify.Event
	spare    []fsnotify.Event // the slice Run gave back, reused
	errs     []error
	bytes    int
	overflow bool

	ready chan struct{} // holds a value while something is queued
}

func newWatchQueue() *watchQueue {
	return &watchQueue{ready: make(chan struct{}, 1)}
}

const eventSize = int(unsafe.Sizeof(fsnotify.Event{}))

func (q *watchQueue) push(ev fsnotify.Event, err error) {
	q.mu.Lock()
	switch {
	case errors.Is(err, fsnotify.ErrEventOverflow):
		q.overflow = true
	case err != nil:
		if len(q.errs) < maxQueuedErrors {
			q.errs = append(q.errs, err)
		}
	case q.overflow:
		// A rescan will see what this event says.
	case q.bytes+eventSize+len(ev.Name) > maxQueuedBytes:
		q.overflow = true
		clear(q.events)
		q.events, q.bytes = q.events[:0], 0
	default:
		q.events = append(q.events, ev)
		q.bytes += eventSize + len(ev.Name)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns what is queued and empties the queue; overflow reports
// that events were lost. The events are q's until the next take: the
// caller must be done with them by then.
func (q *watchQueue) take() (events []fsnotify.Event, errs []error, overflow bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	events, errs, overflow = q.events, q.errs, q.overflow
	clear(q.spare)
	if cap(q.spare) > 4096 {
		q.spare = nil // let a burst's memory go
	}
	q.events, q.spare = q.spare[:0], events
	q.errs, q.bytes, q.overflow = nil, 0, false
	return events, errs, overflow
}
