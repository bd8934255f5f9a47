// Package outbox is the bounded queue in front of one client session's
// connection: every outgoing message waits in it for the session's one
// writer goroutine. Producers (the index watcher, the runs engine, log
// followers, upstreams) only ever queue, so a client that stops reading
// costs its own session and nobody else's: when its queue overflows the
// session is given up on.
//
// It owns the queue and its two signals (closed, failed); it does not
// own the writer, the connection or the deadline, which are the
// transport's.
package outbox

import (
	"context"
	"errors"
	"sync"
)

// The bounds: a burst of notifications (a branch switch touching
// thousands of subscribed files) fits; a client that stops reading fills
// them and is dropped.
const (
	MaxMessages = 8192
	MaxBytes    = 16 << 20
)

var (
	// ErrFull is what a push that does not wait gets from a full queue.
	ErrFull = errors.New("client is not reading its messages: its queue is full")
	// ErrClosed is what a push gets once the queue is closed.
	ErrClosed = errors.New("connection closed")
)

// Queue is a bounded FIFO of T. It is safe for concurrent use.
type Queue[T any] struct {
	mu     sync.Mutex
	q      []T
	sizes  []int
	bytes  int
	ready  chan struct{} // 1-buffered: something was queued
	room   chan struct{} // 1-buffered: something was taken
	done   chan struct{} // closed by close: take stops
	broken chan struct{} // closed by fail: push stops
	cause  error

	doneOnce, brokenOnce sync.Once
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{}), broken: make(chan struct{})}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Push queues v, of about size bytes. With wait false it never blocks: a
// full queue is ErrFull. With wait true it waits for room until ctx
// ends or the outbox closes or fails. An empty queue takes anything, so
// one message larger than the byte bound still goes out.
func (o *Queue[T]) Push(ctx context.Context, v T, size int, wait bool) error {
	for {
		select {
		case <-o.broken:
			return o.Err()
		case <-o.done:
			return ErrClosed
		default:
		}
		o.mu.Lock()
		if len(o.q) == 0 || len(o.q) < MaxMessages && o.bytes+size <= MaxBytes {
			o.q = append(o.q, v)
			o.sizes = append(o.sizes, size)
			o.bytes += size
			o.mu.Unlock()
			poke(o.ready)
			return nil
		}
		o.mu.Unlock()
		if !wait {
			return ErrFull
		}
		select {
		case <-o.room:
		case <-o.broken:
			return o.Err()
		case <-o.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Take waits for the next message; false once the outbox is closed or
// has failed.
func (o *Queue[T]) Take() (T, bool) {
	for {
		select {
		case <-o.done:
			var zero T
			return zero, false
		case <-o.broken:
			var zero T
			return zero, false
		default:
		}
		if v, ok := o.TakeNow(); ok {
			return v, true
		}
		select {
		case <-o.ready:
		case <-o.done:
		case <-o.broken:
		}
	}
}

// TakeNow returns the next message without waiting.
func (o *Queue[T]) TakeNow() (T, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var zero T
	if len(o.q) == 0 {
		return zero, false
	}
	v := o.q[0]
	o.q[0] = zero
	o.q = o.q[1:]
	o.bytes -= o.sizes[0]
	o.sizes = o.sizes[1:]
	if len(o.q) == 0 {
		o.q, o.sizes = nil, nil // let a burst's backing array go
	}
	poke(o.room)
	return v, true
}

// Close stops Take; Push fails from now on. What is queued stays for
// TakeNow (a flush).
func (o *Queue[T]) Close() { o.doneOnce.Do(func() { close(o.done) }) }

// Fail records why the connection broke; Push and Take stop at once. It
// reports whether this call was the first.
func (o *Queue[T]) Fail(cause error) (first bool) {
	o.brokenOnce.Do(func() {
		o.mu.Lock()
		o.cause = cause
		o.mu.Unlock()
		close(o.broken)
		first = true
	})
	return first
}

// Err is why the queue failed, nil while it has not.
func (o *Queue[T]) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cause
}

// Done is closed by Close.
func (o *Queue[T]) Done() <-chan struct{} { return o.done }

// Broken is closed by Fail.
func (o *Queue[T]) Broken() <-chan struct{} { return o.broken }
