package localapi

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// events answers GET /v1/events: the status document now, then again
// each time it changes (coalesced, at most every 100 ms), and a heartbeat
// line when nothing changed for a while. The dashboard lives on it.
func (a *API) events(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", wire.ContentNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		changed := a.changes.wait()
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout))
		if err := enc.Encode(a.cfg.Status()); err != nil {
			return streamError{err}
		}
		if err := rc.Flush(); err != nil {
			return streamError{err}
		}
		t := time.NewTimer(a.cfg.Heartbeat)
		select {
		case <-r.Context().Done():
			t.Stop()
			return nil
		case <-a.changes.closed():
			t.Stop()
			return nil
		case <-changed:
			t.Stop()
			select { // coalesce a burst
			case <-r.Context().Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		case <-t.C:
		}
	}
}

// changes tells waiters that flyd's status changed: sessions, runs,
// upstreams. It is a broadcast without per-waiter queues.
type changes struct {
	mu   sync.Mutex
	ch   chan struct{}
	done chan struct{}
}

func newChanges() *changes {
	return &changes{ch: make(chan struct{}), done: make(chan struct{})}
}

// wait returns a channel closed at the next change.
func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// bump wakes every waiter.
func (c *changes) bump() {
	c.mu.Lock()
	close(c.ch)
	c.ch = make(chan struct{})
	c.mu.Unlock()
}

// closed is closed when flyd stops: event streams end.
func (c *changes) closed() <-chan struct{} { return c.done }

func (c *changes) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}
