package index

import (
	"errors"
	"strings"
	"testing"

	"github.com/fsnotify/fsnotify"
)

// TestWatchQueueBounded: the watcher's events wait for Run in a queue
// bounded in bytes; past the bound they are dropped and Run is told to
// rescan, and the queue is empty and usable again after a take.
func TestWatchQueueBounded(t *testing.T) {
	q := newWatchQueue()
	q.push(fsnotify.Event{Name: "/w/a.dart", Op: fsnotify.Write}, nil)
	q.push(fsnotify.Event{}, errors.New("boom"))
	select {
	case <-q.ready:
	default:
		t.Fatal("no ready signal after a push")
	}
	events, errs, overflow := q.take()
	if len(events) != 1 || events[0].Name != "/w/a.dart" || len(errs) != 1 || overflow {
		t.Errorf("take = %v, %v, %v; want one event and one error", events, errs, overflow)
	}

	name := "/w/" + strings.Repeat("x", 4000)
	for range 2 * maxQueuedBytes / len(name) {
		q.push(fsnotify.Event{Name: name, Op: fsnotify.Create}, nil)
	}
	for range 3 * maxQueuedErrors {
		q.push(fsnotify.Event{}, errors.New("boom"))
	}
	events, errs, overflow = q.take()
	if len(events) != 0 || !overflow || len(errs) != maxQueuedErrors {
		t.Errorf("after a flood: %d events, %d errors, overflow %v; want none, %d, true", len(events), len(errs), overflow, maxQueuedErrors)
	}
	q.push(fsnotify.Event{}, fsnotify.ErrEventOverflow)
	if _, _, overflow := q.take(); !overflow {
		t.Errorf("the watcher's own overflow was not passed on")
	}
	q.push(fsnotify.Event{Name: "/w/b.dart", Op: fsnotify.Write}, nil)
	if events, _, overflow := q.take(); len(events) != 1 || overflow {
		t.Errorf("take after an overflow = %v, %v; want one event", events, overflow)
	}
}
