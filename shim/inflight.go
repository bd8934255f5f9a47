package shim

import (
	"encoding/json"
	"sync"
)

// inflight is the set of requests sent to flyd and not yet answered,
// keyed by idKey. It is safe for concurrent use.
type inflight struct {
	mu     sync.Mutex
	ids    map[string]json.RawMessage // id as the client sent it
	idleCh chan struct{}              // closed when ids empties; nil if no one waits
}

func newInflight() *inflight {
	return &inflight{ids: make(map[string]json.RawMessage)}
}

// forget drops the requests whose idKeys are keys: no reply to them is
// awaited any more.
func (f *inflight) forget(keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.ids, k)
	}
	f.signalLocked()
}

// add records a request id. id must not be modified afterwards.
func (f *inflight) add(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids[idKey(id)] = id
}

// done forgets id, which has been answered.
func (f *inflight) done(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, idKey(id))
	f.signalLocked()
}

func (f *inflight) signalLocked() {
	if len(f.ids) == 0 && f.idleCh != nil {
		close(f.idleCh)
		f.idleCh = nil
	}
}

// len is the number of requests in flight.
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

// idle returns a channel that is closed once no request is in flight.
func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	switch {
	case len(f.ids) == 0:
		close(ch)
	case f.idleCh != nil:
		ch = f.idleCh
	default:
		f.idleCh = ch
	}
	return ch
}

// fail answers every request in flight but those whose idKey is in keep
// with an internal error carrying msg, written to out, and forgets them.
// It returns how many there were. The caller must make sure no reply from
// flyd can still be written.
func (f *inflight) fail(msg string, out *lineWriter, keep map[string]bool) int {
	f.mu.Lock()
	ids := f.ids
	f.ids = make(map[string]json.RawMessage)
	for k := range keep {
		if id, ok := ids[k]; ok {
			f.ids[k] = id
			delete(ids, k)
		}
	}
	f.signalLocked()
	f.mu.Unlock()
	for _, id := range ids {
		if out.writeLine(errorReply(id, codeInternalError, msg)) != nil {
			break
		}
	}
	return len(ids)
}
