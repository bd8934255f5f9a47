package daemon

import (
	"context"
	"errors"
	"sync"
)

// Every session's outgoing messages go through an outbox: a bounded queue
// that one writer goroutine per session drains. Producers (the index
// watcher, the runs engine, log followers, upstreams) only ever queue, so
// a client that stops reading costs its own session and nobody else's:
// when its queue overflows, or a write misses its deadline, the session
// is closed.

// Outbox bounds: a burst of notifications (a branch switch touching
// thousands of subscribed files) fits; a client that stops reading fills
// it and is dropped.
const (
	outboxMessages = 8192
	outboxBytes    = 16 << 20
)

var (
	errSlowClient   = errors.New("client is not reading its messages: its queue is full")
	errOutboxClosed = errors.New("connection closed")
)

// outbox is a bounded FIFO of T. It is safe for concurrent use.
type outbox[T any] struct {
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

func newOutbox[T any]() *outbox[T] {
	return &outbox[T]{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{}), broken: make(chan struct{})}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues v, of about size bytes. With wait false it never blocks: a
// full queue is errSlowClient. With wait true it waits for room until ctx
// ends or the outbox closes or fails. An empty queue takes anything, so
// one message larger than the byte bound still goes out.
func (o *outbox[T]) push(ctx context.Context, v T, size int, wait bool) error {
	for {
		select {
		case <-o.broken:
			return o.err()
		case <-o.done:
			return errOutboxClosed
		default:
		}
		o.mu.Lock()
		if len(o.q) == 0 || len(o.q) < outboxMessages && o.bytes+size <= outboxBytes {
			o.q = append(o.q, v)
			o.sizes = append(o.sizes, size)
			o.bytes += size
			o.mu.Unlock()
			poke(o.ready)
			return nil
		}
		o.mu.Unlock()
		if !wait {
			return errSlowClient
		}
		select {
		case <-o.room:
		case <-o.broken:
			return o.err()
		case <-o.done:
			return errOutboxClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take waits for the next message; false once the outbox is closed or
// has failed.
func (o *outbox[T]) take() (T, bool) {
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
		if v, ok := o.takeNow(); ok {
			return v, true
		}
		select {
		case <-o.ready:
		case <-o.done:
		case <-o.broken:
		}
	}
}

// takeNow returns the next message without waiting.
func (o *outbox[T]) takeNow() (T, bool) {
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

// close stops take; push fails from now on. What is queued stays for
// takeNow (a flush).
func (o *outbox[T]) close() { o.doneOnce.Do(func() { close(o.done) }) }

// fail records why the connection broke; push and take stop at once. It
// reports whether this call was the first.
func (o *outbox[T]) fail(cause error) (first bool) {
	o.brokenOnce.Do(func() {
		o.mu.Lock()
		o.cause = cause
		o.mu.Unlock()
		close(o.broken)
		first = true
	})
	return first
}

// err is why the outbox failed, nil while it has not.
func (o *outbox[T]) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cause
}
