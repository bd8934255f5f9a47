package index

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/windows"
)

// watcher watches a workspace's whole tree through one handle on its root
// (ReadDirectoryChangesW of the subtree), and puts what it reports into a
// watchQueue. A watch on each directory, as inotify needs, would keep a
// handle open on each, and Windows refuses to rename or delete a directory
// while a handle is open under it: the user could no longer rename a
// folder of the project while flyd serves it. The root's own handle keeps
// only the root's parent from being renamed, as any editor's does.
//
// A directory outside the root (its parent, to see the root deleted and
// made again) is watched on its own, without its subtree.
type watcher struct {
	root string // absolute, clean
	q    *watchQueue
	stop windows.Handle // an event, set by close

	mu      sync.Mutex
	closed  bool
	watched map[string]bool // directory → whether its watch is of its subtree
	wg      sync.WaitGroup  // each watch's goroutine
}

// watchBufSize is the buffer of one watch; 64 KB is the most a watch of a
// directory on a network share may have. When changes come faster than
// they are read, the system reports an overflow, and Run rescans.
const watchBufSize = 64 << 10

// watchFilter is what a watch reports: names made, removed or renamed,
// and writes.
const watchFilter = windows.FILE_NOTIFY_CHANGE_FILE_NAME | windows.FILE_NOTIFY_CHANGE_DIR_NAME |
	windows.FILE_NOTIFY_CHANGE_LAST_WRITE | windows.FILE_NOTIFY_CHANGE_SIZE

var errWatchClosed = errors.New("the watcher is closed")

// newWatcher starts a watcher of the tree at root (absolute, clean) that
// reports to q. Nothing is watched until add.
func newWatcher(root string, q *watchQueue) (*watcher, error) {
	stop, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	return &watcher{root: root, q: q, stop: stop, watched: make(map[string]bool)}, nil
}

// add watches the directory abs. The root is watched with its whole
// subtree, which covers every directory under it: adding one of those
// only checks that the root is watched. Any other directory is watched
// without its subtree. Once add returns, every change is reported.
func (w *watcher) add(abs string) error {
	subtree := abs == w.root
	if !subtree && strings.HasPrefix(abs, strings.TrimSuffix(w.root, `\`)+`\`) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.watched[w.root] {
			return fmt.Errorf("watch %s: the workspace's root is not watched", abs)
		}
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("watch %s: %w", abs, errWatchClosed)
	}
	if _, ok := w.watched[abs]; ok {
		return nil
	}
	d, err := openWatch(abs, subtree)
	if err != nil {
		return fmt.Errorf("watch %s: %w", abs, err)
	}
	w.watched[abs] = subtree
	w.wg.Go(func() { w.read(d) }) // owned by w: ends when close sets stop (or the directory goes), and close waits for it
	return nil
}

// remove does nothing: the directories the index stops watching are under
// the root, whose watch covers them while they are there.
func (w *watcher) remove(string) error { return nil }

// close stops every watch and waits for their goroutines: after it, the
// queue gets nothing more.
func (w *watcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	windows.SetEvent(w.stop)
	w.wg.Wait()
	windows.CloseHandle(w.stop)
}

// dirWatch is one watched directory: its handle, opened for overlapped
// reads of its changes, the read in flight and its buffer.
type dirWatch struct {
	dir     string
	subtree bool
	h       windows.Handle
	ov      windows.Overlapped // ov.HEvent is set when a read completes
	buf     []byte
}

// openWatch opens dir and starts the first read of its changes: the
// system records every change from then on, between reads too.
func openWatch(dir string, subtree bool) (*dirWatch, error) {
	p, err := windows.UTF16PtrFromString(longPath(dir))
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.FILE_LIST_DIRECTORY,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OVERLAPPED, 0)
	if err != nil {
		return nil, err
	}
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	d := &dirWatch{dir: dir, subtree: subtree, h: h, buf: make([]byte, watchBufSize)}
	d.ov.HEvent = ev
	if err := d.start(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// start starts a read of the directory's changes.
func (d *dirWatch) start() error {
	windows.ResetEvent(d.ov.HEvent)
	return windows.ReadDirectoryChanges(d.h, &d.buf[0], uint32(len(d.buf)), d.subtree, watchFilter, nil, &d.ov, 0)
}

func (d *dirWatch) close() {
	windows.CloseHandle(d.h)
	windows.CloseHandle(d.ov.HEvent)
}

// read reports d's changes until close, or until its watch ends.
func (w *watcher) read(d *dirWatch) {
	defer d.close()
	for {
		r, err := windows.WaitForMultipleObjects([]windows.Handle{d.ov.HEvent, w.stop}, false, windows.INFINITE)
		if err != nil || r != windows.WAIT_OBJECT_0 {
			// Stopped: cancel the read, and wait for it to let go of
			// the buffer.
			windows.CancelIoEx(d.h, &d.ov)
			var n uint32
			windows.GetOverlappedResult(d.h, &d.ov, &n, true)
			return
		}
		var n uint32
		err = windows.GetOverlappedResult(d.h, &d.ov, &n, false)
		switch {
		case errors.Is(err, windows.ERROR_NOTIFY_ENUM_DIR), err == nil && n == 0:
			w.q.push(fsnotify.Event{}, fsnotify.ErrEventOverflow) // more than the buffer held
		case err != nil:
			w.ended(d, err)
			return
		default:
			w.report(d, d.buf[:n])
		}
		if err := d.start(); err != nil {
			w.ended(d, err)
			return
		}
	}
}

// ended records that d's watch ended with err: its directory is gone, or
// its volume. A directory's parent's watch reports it gone; the end of
// the root's is taken as an overflow, and the rescan that follows watches
// the root again if it is there.
func (w *watcher) ended(d *dirWatch, err error) {
	w.mu.Lock()
	delete(w.watched, d.dir)
	w.mu.Unlock()
	w.q.push(fsnotify.Event{}, fmt.Errorf("watch of %s ended: %w", d.dir, err))
	if d.subtree {
		w.q.push(fsnotify.Event{}, fsnotify.ErrEventOverflow)
	}
}

// report queues the changes in buf, FILE_NOTIFY_INFORMATION records, as
// fsnotify events named by absolute path.
func (w *watcher) report(d *dirWatch, buf []byte) {
	const head = int(unsafe.Offsetof(windows.FileNotifyInformation{}.FileName))
	for off := 0; off+head <= len(buf); {
		fi := (*windows.FileNotifyInformation)(unsafe.Pointer(&buf[off]))
		end := off + head + int(fi.FileNameLength)
		if end > len(buf) {
			break
		}
		name := windows.UTF16ToString(unsafe.Slice(&fi.FileName, fi.FileNameLength/2))
		var op fsnotify.Op
		switch fi.Action {
		case windows.FILE_ACTION_ADDED, windows.FILE_ACTION_RENAMED_NEW_NAME:
			op = fsnotify.Create
		case windows.FILE_ACTION_REMOVED:
			op = fsnotify.Remove
		case windows.FILE_ACTION_RENAMED_OLD_NAME:
			op = fsnotify.Rename
		case windows.FILE_ACTION_MODIFIED:
			op = fsnotify.Write
		}
		if op != 0 && name != "" {
			full, ok := longName(strings.TrimSuffix(d.dir, `\`)+`\`+name, name)
			if !ok {
				w.q.push(fsnotify.Event{}, fsnotify.ErrEventOverflow) // a rescan sees it by its name
			} else {
				w.q.push(fsnotify.Event{Name: full, Op: op}, nil)
			}
		}
		if fi.NextEntryOffset == 0 {
			break
		}
		off += int(fi.NextEntryOffset)
	}
}

// longName returns the path full of a change, whose part under the
// watched directory is name, by its long names: a change may be reported
// by a short name (FEATUR~1), which the index does not know. ok is false
// when it has one and the path is gone, so that it cannot be told.
func longName(full, name string) (string, bool) {
	if !strings.ContainsRune(name, '~') {
		return full, true
	}
	short := false
	for _, el := range strings.Split(name, `\`) {
		short = short || isShortName(el)
	}
	if !short {
		return full, true
	}
	p, err := windows.UTF16FromString(longPath(full))
	if err != nil {
		return "", false
	}
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n, err := windows.GetLongPathName(&p[0], &buf[0], uint32(len(buf)))
	if err != nil || n == 0 || int(n) >= len(buf) {
		return "", false
	}
	long := windows.UTF16ToString(buf[:n])
	if strings.HasPrefix(long, `\\?\`) && !strings.HasPrefix(full, `\\?\`) {
		long = strings.TrimPrefix(long, `\\?\`)
		if strings.HasPrefix(long, `UNC\`) {
			long = `\\` + long[len(`UNC\`):]
		}
	}
	return long, true
}
