//go:build unix

package index

import "github.com/fsnotify/fsnotify"

// watcher watches the directories of a workspace, each on its own
// (inotify and kqueue watch no tree), and puts what it reports into a
// watchQueue.
type watcher struct {
	w    *fsnotify.Watcher
	done chan struct{} // closed when pump returns
}

// newWatcher starts a watcher of the tree at root (absolute, clean) that
// reports to q. Nothing is watched until add.
func newWatcher(_ string, q *watchQueue) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &watcher{w: fw, done: make(chan struct{})}
	go w.pump(q) // owned by w: ends when close closes fsnotify's channels, and close waits for it
	return w, nil
}

// add watches the directory abs: its entries, not its subdirectories'.
func (w *watcher) add(abs string) error { return w.w.Add(abs) }

// remove stops watching the directory abs.
func (w *watcher) remove(abs string) error { return w.w.Remove(abs) }

// close stops the watcher and waits for its goroutines: after it, the
// queue gets nothing more.
func (w *watcher) close() {
	w.w.Close()
	<-w.done
}

// pump moves fsnotify's events and errors into q until the watcher is
// closed (which closes its channels).
func (w *watcher) pump(q *watchQueue) {
	defer close(w.done)
	events, errs := w.w.Events, w.w.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			q.push(ev, nil)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			q.push(fsnotify.Event{}, err)
		}
	}
}
