package index

import (
	"context"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch events are coalesced: a batch is applied once no event has come
// for indexQuiet, or indexMaxDelay after its first event at the latest.
const (
	indexQuiet    = 50 * time.Millisecond
	indexMaxDelay = 250 * time.Millisecond
)

// Run keeps the index current until ctx is done, then closes the watcher
// and returns ctx.Err(). It applies the watcher's events in batches and
// calls onChange, from this goroutine, after each batch that changed the
// index. It starts no goroutine of its own beyond the short-lived workers
// of a directory walk, which it waits for. Run must be called exactly once;
// calling it with a done ctx just releases the watcher.
func (x *Index) Run(ctx context.Context) error {
	defer func() {
		x.cache.close() // its bytes back to the budget it shares
		x.Root().Close()
		for _, r := range x.retired {
			r.Close()
		}
	}()
	warmCtx, stopWarm := context.WithCancel(ctx)
	var warming sync.WaitGroup
	warming.Go(func() { x.warm(warmCtx) }) // owned by Run: stopped and waited for before the root closes
	defer func() {
		stopWarm()
		warming.Wait()
	}()
	if x.watcher == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	defer x.watcher.close() // waits for the watcher's goroutines
	// The parent's watch reports the root itself being removed and made
	// again (its own watch dies with it): events for the parent's other
	// entries are not under the root and are dropped.
	if parent := filepath.Dir(x.root); parent != x.root {
		if err := x.watcher.add(parent); err != nil {
			x.log.Debug("index: cannot watch the root's parent; a re-created root will not be noticed", indexKeyErr, err)
		}
	}

	pending := make(map[string]fsnotify.Op)
	rescan := false
	var first time.Time // of the pending batch
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-x.queue.ready:
			events, errs, overflow := x.queue.take()
			for _, err := range errs {
				x.log.Warn("index: watch", indexKeyErr, err)
			}
			if overflow && !rescan {
				x.log.Warn("index: watch events overflowed; rescanning")
				rescan = true
			}
			for _, ev := range events {
				rel, ok := x.rel(ev.Name)
				if !ok {
					continue
				}
				if dir := path.Dir(rel); dir != "." && skipDir(dir) {
					continue // under a skipped directory: a watch of a whole tree sees them
				}
				pending[rel] |= ev.Op
			}
			if len(pending) == 0 && !rescan {
				continue
			}
		case <-timer.C:
			x.flush(pending, rescan)
			if len(pending) > 1024 {
				pending = make(map[string]fsnotify.Op) // let a burst's memory go
			} else {
				clear(pending)
			}
			rescan = false
			first = time.Time{}
			continue
		}
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		timer.Reset(min(indexQuiet, first.Add(indexMaxDelay).Sub(now)))
	}
}

// flush applies one batch of events: each path that had an event is
// looked at again on disk, or the whole tree is rescanned after an
// overflow. It publishes the new snapshot, then calls onChange.
func (x *Index) flush(pending map[string]fsnotify.Op, rescan bool) {
	if _, ok := pending[""]; ok {
		x.checkRoot()
	}
	old := x.snapshot()
	var files []File
	var ch Change
	if rescan {
		files, ch = x.rescan(old, pending)
	} else {
		files, ch = x.apply(old, pending)
	}
	x.nDirs.Store(int64(len(x.dirs)))
	// Cached contents go before the change is published.
	if _, rootEvent := pending[""]; rescan || rootEvent {
		x.cache.drop(nil, true)
	} else if len(pending) > 0 {
		x.cache.drop(slices.Concat(slices.Collect(maps.Keys(pending)), ch.Updated, ch.Removed), false)
	}
	if ch.empty() {
		return
	}
	x.files.Store(&files)
	x.log.Debug("index changed", indexKeyUpdated, len(ch.Updated), indexKeyAdded, len(ch.Added), indexKeyRemoved, len(ch.Removed))
	x.onChange(ch)
}

// checkRoot notices that the root directory was replaced (deleted and
// created again, or renamed over) and opens the new one, so that reads
// and the walk that follows see its files.
func (x *Index) checkRoot() {
	id := idOf(x.root)
	if id == (fileID{}) || id == x.rootID {
		return
	}
	r, err := os.OpenRoot(x.root)
	if err != nil {
		x.log.Warn("index: the root was re-created but cannot be opened", indexKeyErr, err)
		return
	}
	x.rootID = id
	x.retired = append(x.retired, x.fsRoot.Swap(r))
	x.log.Info("index: the root directory was re-created; indexing it again")
}

// contentOps are the events after which a file that is still there counts
// as updated: a write, or a create (editors rewrite files, and a rename
// over a file replaces it, which inotify reports as a create of its name).
// These are how inotify reports new content; the index keeps no size or
// time to compare, and needs none. A chmod or a touch alone is no update.
const contentOps = fsnotify.Write | fsnotify.Create

// fileEdit is the new state of one path in a batch: present or removed.
// A present file found by walking a new or re-created directory is fresh:
// it may be another file than the one the snapshot had at its path.
type fileEdit struct {
	f       File
	present bool
	fresh   bool
}

// apply reconciles the paths of one batch with the disk. First, watched
// directories that went away (or were renamed, even if another took their
// place) drop their watches and files. Then each path is looked at: a new
// directory is walked and watched, and a file is added, updated or
// removed. A file that was and still is there is updated if it had a
// content event (contentOps), or if it was found by walking a directory
// (which can have replaced the one that held the old file).
func (x *Index) apply(old []File, pending map[string]fsnotify.Op) ([]File, Change) {
	paths := slices.Sorted(maps.Keys(pending))
	edits := make(map[string]fileEdit)
	x.dropGoneDirs(old, paths, pending, edits)
	x.lookAgain(old, paths, pending, edits)
	ch, changed := diffEdits(old, edits, pending)
	if ch.empty() {
		return old, ch
	}
	return mergeEdits(old, changed, edits), ch
}

// removeUnder marks every file of old under dir as removed.
func removeUnder(old []File, dir string, edits map[string]fileEdit) {
	lo, hi := rangeUnder(old, dir)
	for _, f := range old[lo:hi] {
		edits[f.Path] = fileEdit{}
	}
}

// dropGoneDirs handles the directories of a batch that went away (or were
// renamed, even if another took their place): their watches go first, so
// that a directory renamed within the root is watched again under its new
// name (inotify watches follow the inode, not the name), and their files
// are marked removed.
func (x *Index) dropGoneDirs(old []File, paths []string, pending map[string]fsnotify.Op, edits map[string]fileEdit) {
	gone := "\x00" // the last directory dropped; paths sort after it
	for _, p := range paths {
		if isUnder(p, gone) {
			continue
		}
		_, known := x.dirs[p]
		if !known {
			if lo, hi := rangeUnder(old, p); lo == hi {
				continue
			}
		}
		if _, isDir, _ := x.statFile(p); isDir && pending[p]&(fsnotify.Remove|fsnotify.Rename) == 0 {
			continue
		}
		x.unwatchUnder(p)
		removeUnder(old, p, edits)
		gone = p
	}
}

// lookAgain records each path of the batch as it is now: a file is
// present or removed, and a new (or re-created) directory is walked and
// watched, its files fresh.
func (x *Index) lookAgain(old []File, paths []string, pending map[string]fsnotify.Op, edits map[string]fileEdit) {
	walked := "\x00"
	for _, p := range paths {
		if isUnder(p, walked) {
			continue
		}
		f, isDir, ok := x.statFile(p)
		switch {
		case ok:
			edits[p] = fileEdit{f: f, present: true}
			continue
		case !isDir:
			edits[p] = fileEdit{}
			continue
		}
		if p != "" {
			edits[p] = fileEdit{} // was it a file?
		}
		if _, known := x.dirs[p]; known && pending[p]&fsnotify.Create == 0 || skipDir(p) {
			continue
		}
		files, dirs, err := x.walk(p, true)
		if err != nil {
			x.log.Debug("index: skip unreadable directory", indexKeyPath, p, indexKeyErr, err)
			continue
		}
		for _, d := range dirs {
			x.dirs[d] = struct{}{}
		}
		removeUnder(old, p, edits)
		for _, f := range files {
			edits[f.Path] = fileEdit{f: f, present: true, fresh: true}
		}
		walked = p
	}
}

// diffEdits compares the edits with old: what was added, removed or
// updated, and the changed paths in order. A file that was and still is
// there is updated if it had a content event (contentOps), or if it was
// found by walking a directory (which can have replaced the one that held
// the old file).
func diffEdits(old []File, edits map[string]fileEdit, pending map[string]fsnotify.Op) (Change, []string) {
	var ch Change
	keys := slices.Sorted(maps.Keys(edits))
	changed := keys[:0]
	for _, k := range keys {
		e := edits[k]
		_, inOld := slices.BinarySearchFunc(old, k, cmpFilePath)
		switch {
		case e.present && !inOld:
			ch.Added = append(ch.Added, k)
		case !e.present && inOld:
			ch.Removed = append(ch.Removed, k)
		case e.present && inOld && (pending[k]&contentOps != 0 || e.fresh):
			ch.Updated = append(ch.Updated, k)
		default:
			continue
		}
		changed = append(changed, k)
	}
	return ch, changed
}

// mergeEdits returns the new snapshot: old with the changed paths (sorted)
// merged in.
func mergeEdits(old []File, changed []string, edits map[string]fileEdit) []File {
	files := make([]File, 0, len(old)+len(changed))
	i := 0
	for _, k := range changed {
		j, inOld := slices.BinarySearchFunc(old[i:], k, cmpFilePath)
		files = append(files, old[i:i+j]...)
		i += j
		if inOld {
			i++
		}
		if e := edits[k]; e.present {
			files = append(files, e.f)
		}
	}
	return append(files, old[i:]...)
}

// rescan walks the whole tree again, after events were lost, and diffs it
// with the snapshot. Directories that are gone lose their watches.
//
// A file that was and still is there counts as updated if it had a content
// event, or if it may have changed since the last walk of the whole tree
// (changedSince): events lost since then could have been its writes. That
// costs one stat per file, which the build avoids, but overflows are rare;
// the alternative, to call every file updated, would have every subscriber
// re-read every file it follows.
func (x *Index) rescan(old []File, pending map[string]fsnotify.Op) ([]File, Change) {
	since := x.synced.Add(-ctimeSlack)
	start := time.Now()
	files, dirs, err := x.walk("", true)
	if err != nil {
		x.log.Warn("index: rescan", indexKeyErr, err)
		return old, Change{}
	}
	x.synced = start
	now := make(map[string]struct{}, len(dirs))
	for _, d := range dirs {
		now[d] = struct{}{}
	}
	for d := range x.dirs {
		if _, ok := now[d]; !ok {
			x.watcher.remove(x.abs(d)) // may be gone already
		}
	}
	x.dirs = now

	var ch Change
	i, j := 0, 0
	for i < len(old) || j < len(files) {
		var c int
		switch {
		case i == len(old):
			c = 1
		case j == len(files):
			c = -1
		default:
			c = strings.Compare(old[i].Path, files[j].Path)
		}
		switch {
		case c < 0:
			ch.Removed = append(ch.Removed, old[i].Path)
			i++
		case c > 0:
			ch.Added = append(ch.Added, files[j].Path)
			j++
		default:
			if p := files[j].Path; pending[p]&contentOps != 0 || x.changedSince(p, since) {
				ch.Updated = append(ch.Updated, p)
			}
			i++
			j++
		}
	}
	return files, ch
}

// unwatchUnder removes the watches of dir and of the directories under it.
func (x *Index) unwatchUnder(dir string) {
	for d := range x.dirs {
		if d == dir || isUnder(d, dir) {
			x.watcher.remove(x.abs(d)) // may be gone already
			delete(x.dirs, d)
		}
	}
}

// ctimeSlack is how far the change times that the kernel stamps may lag
// behind time.Now: they come from a clock that is updated once a tick
// (10 ms at worst), and changedSince allows for ten of those.
const ctimeSlack = 100 * time.Millisecond

// changedSince reports whether the file at rel may have changed at or
// after t: its status change time (ctime) is not before t, it is a symlink
// (whose target may have changed, or been swapped), or it cannot be looked
// at. Unlike the modification time, ctime cannot be set back: a write, a
// rename onto the name and a new link all move it to now. A ctime in whole
// seconds may come from a filesystem that keeps no more (ext4 with small
// inodes, HFS+; FAT keeps 2 s), so it is taken as up to 2 s later. What
// this cannot see is a clock stepped back, or a filesystem that lets ctime
// be set (FAT again).
func (x *Index) changedSince(rel string, t time.Time) bool {
	ctime, ok := changeTime(x.abs(rel))
	if !ok {
		return true
	}
	return !ctime.Before(t)
}

// isUnder reports whether p is strictly under the directory dir ("" is the
// root).
func isUnder(p, dir string) bool {
	if dir == "" {
		return p != ""
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// rangeUnder returns the bounds of the files under dir ("" is the root) in
// files, which is sorted: all paths that start with dir+"/".
func rangeUnder(files []File, dir string) (lo, hi int) {
	if dir == "" {
		return 0, len(files)
	}
	lo, _ = slices.BinarySearchFunc(files, dir+"/", cmpFilePath)
	hi, _ = slices.BinarySearchFunc(files[lo:], dir+"0", cmpFilePath) // '0' follows '/'
	return lo, lo + hi
}
