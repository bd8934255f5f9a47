// Package index owns a workspace's live index of served files: which files
// are served (Rules: the allowlist, secrets, skipped directories, and the
// names Windows reads as another file, NameRefusal), the parallel walk
// that builds the index, and the watcher that keeps it current (fsnotify on
// each directory on Unix, one watch of the whole tree on Windows),
// including a root that is deleted and made again. It gives out the
// workspace's os.Root, through which every file access goes.
//
// It does not own sessions, MCP or notifications (daemon), nor the store.
package index

import (
	"cmp"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
)

// Log attribute keys of the index.
const (
	indexKeyRoot    = "root"
	indexKeyPath    = "path"
	indexKeyErr     = logkey.Error
	indexKeyFiles   = "files"
	indexKeyDirs    = "dirs"
	indexKeyElapsed = "elapsed_ms"
	indexKeyUpdated = "updated"
	indexKeyAdded   = "added"
	indexKeyRemoved = "removed"
)

// File is one served file of a workspace. It holds only what a directory
// read tells without a stat: a stat per file cost a build more than its
// directory reads, and the result was stale by the time anyone asked.
// Those who need a file's size and time stat it then: see StatFiles.
type File struct {
	Path string // slash-separated, relative to the root
}

// FileInfo is a served file with its size and modification time, as
// StatFiles found them.
type FileInfo struct {
	Path    string
	Size    int64
	ModTime time.Time
}

// StatFiles stats files, such as a page of an index, through root, which
// follows symlinks only within it. Files that are gone, or are no longer
// regular files, are left out: the index will drop them once their events
// are applied. It opens each directory once for a run of files in it (an
// index is sorted, so a page's files come in a few such runs), then stats
// each file in it; it is meant for pages, not for a whole index.
func StatFiles(root *os.Root, files []File) []FileInfo {
	out := make([]FileInfo, 0, len(files))
	var dir string
	var dirRoot *os.Root // dir's, or nil if it cannot be opened
	defer func() {
		if dirRoot != nil {
			dirRoot.Close()
		}
	}()
	for i, f := range files {
		d, name := path.Split(f.Path)
		if i == 0 || d != dir {
			if dirRoot != nil {
				dirRoot.Close()
			}
			dir = d
			var err error
			if dirRoot, err = root.OpenRoot(filepath.FromSlash(cmp.Or(d, "."))); err != nil {
				dirRoot = nil
			}
		}
		if dirRoot == nil {
			continue
		}
		fi, err := dirRoot.Lstat(name)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			fi, err = root.Stat(filepath.FromSlash(f.Path)) // where it leads, if within root
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue // gone, or not a file
		}
		if n, err := linkCountAt(root, f.Path, fi); err != nil || n != 1 {
			continue // hard-linked: see openServed
		}
		out = append(out, FileInfo{Path: f.Path, Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out
}

// Change is one batch of changes to an index. Each list is sorted.
type Change struct {
	Updated        []string // files whose content changed (still present)
	Added, Removed []string
}

func (c Change) empty() bool {
	return len(c.Updated) == 0 && len(c.Added) == 0 && len(c.Removed) == 0
}

// Stats describes an index, for status pages.
type Stats struct {
	Files       int           // served files
	Dirs        int           // directories watched
	BuildTime   time.Duration // of the initial build, watches included
	WatchErrors int           // watches that could not be added (e.g. the inotify limit)
	CacheFiles  int           // files whose contents grep keeps in memory
	CacheBytes  int           // their size
	Warm        bool          // the warmer has been through every file
}

// Index is the shared, live index of the served files under one workspace
// root: every session on that root reads the same one.
//
// The files are an immutable snapshot, sorted by Path, that is replaced
// copy-on-write after each batch of changes. All methods are safe for
// concurrent use; the slices they return are shared and must not be
// modified. Run keeps the index current and must be called once: it owns
// the file watcher and releases it when its context is done.
type Index struct {
	root     string                  // absolute, symlink-resolved
	prefix   string                  // root + separator: what event names start with
	fsRoot   atomic.Pointer[os.Root] // the root directory as it is now; see Root
	rootID   fileID                  // which directory fsRoot is
	retired  []*os.Root              // roots of directories since replaced; closed by Run
	match    ruleMatcher
	log      *slog.Logger
	onChange func(Change)
	watcher  *watcher
	queue    *watchQueue // the watcher's events, until Run applies them

	files       atomic.Pointer[[]File]
	cache       contentCache  // file contents grep or the warmer has read
	searches    quiet         // searches running, which the warmer waits for
	warmed      atomic.Bool   // the warmer went through every file
	warmDone    chan struct{} // closed when the warmer ends, for whatever reason
	searched    chan struct{} // closed by the first search, which starts the warmer
	searchOnce  sync.Once
	buildTime   time.Duration
	nDirs       atomic.Int64
	watchErrors atomic.Int64

	// dirs holds the watched directories, relative ("" is the root). The
	// build fills it; after that, only Run's goroutine touches it.
	dirs map[string]struct{}
	// synced is when the last walk of the whole tree (the build or a
	// rescan) started: a change since then may have been seen only through
	// events. Only the build and then Run's goroutine touch it.
	synced time.Time
}

// New builds the index of root, an absolute and symlink-resolved
// directory, and watches every directory that is not skipped as it goes,
// so nothing is missed between the build and the watch. It reads
// directories in parallel and returns when the index is complete. Run must
// then be called to keep it current and to release the watcher; onChange
// (which may be nil) is called from Run's goroutine after each non-empty
// batch of changes, and should not block for long.
func New(root string, rules Rules, log *slog.Logger, onChange func(Change)) (*Index, error) {
	return openIndex(root, rules, log, onChange, true)
}

// openIndex is New, optionally without the watcher: without it, the
// index is never updated and Run only releases it. Benchmarks use that to
// measure the walk alone.
func openIndex(root string, rules Rules, log *slog.Logger, onChange func(Change), watch bool) (*Index, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("index %s: root is not absolute", root)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onChange == nil {
		onChange = func(Change) {}
	}
	root = filepath.Clean(root)
	fsRoot, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", root, err)
	}
	x := &Index{
		root:     root,
		prefix:   strings.TrimSuffix(root, string(filepath.Separator)) + string(filepath.Separator),
		rootID:   idOf(root),
		match:    rules.compile(),
		log:      log.With(indexKeyRoot, root),
		onChange: onChange,
		warmDone: make(chan struct{}), searched: make(chan struct{}),
		dirs:  make(map[string]struct{}),
		cache: contentCache{budget: NewCache(DefaultCacheBytes(), true)},
	}
	x.fsRoot.Store(fsRoot)
	if watch {
		// Without a watcher (the limit of inotify instances is per user,
		// and low), the index is still served, but never updated.
		x.queue = newWatchQueue()
		if x.watcher, err = newWatcher(root, x.queue); err != nil {
			x.watchErrors.Add(1)
			x.log.Warn("cannot watch workspace: its index will not follow changes", indexKeyErr, err)
			watch = false
		}
	}
	start := time.Now()
	files, dirs, err := x.walk("", watch)
	if err != nil {
		if x.watcher != nil {
			x.watcher.close()
		}
		fsRoot.Close()
		return nil, fmt.Errorf("index %s: %w", root, err)
	}
	x.buildTime = time.Since(start)
	x.synced = start
	for _, d := range dirs {
		x.dirs[d] = struct{}{}
	}
	x.nDirs.Store(int64(len(x.dirs)))
	x.files.Store(&files)
	x.log.Debug("index built", indexKeyFiles, len(files), indexKeyDirs, len(dirs), indexKeyElapsed, x.buildTime.Milliseconds())
	return x, nil
}

func (x *Index) snapshot() []File { return *x.files.Load() }

// Root returns the workspace's root directory, through which every file
// access goes (it never leaves the directory). If the directory is
// deleted and created again, Root returns the new one once the watcher
// has seen it; a Root obtained before stays valid until Run returns.
func (x *Index) Root() *os.Root { return x.fsRoot.Load() }

// fileID identifies a directory, to tell a re-created root from the old.
type fileID struct{ dev, ino uint64 }

// Len returns the number of served files.
func (x *Index) Len() int { return len(x.snapshot()) }

// Lookup returns the served file at rel, a slash-separated path relative to
// the root.
func (x *Index) Lookup(rel string) (File, bool) {
	files := x.snapshot()
	i, ok := slices.BinarySearchFunc(files, rel, cmpFilePath)
	if !ok {
		return File{}, false
	}
	return files[i], true
}

// After returns up to n files whose Path sorts after path ("" starts at the
// first file), in order. It takes O(log N + n): it backs paginated listing.
func (x *Index) After(path string, n int) []File {
	files := x.snapshot()
	i, found := slices.BinarySearchFunc(files, path, cmpFilePath)
	if found {
		i++
	}
	j := i + max(n, 0)
	if j > len(files) {
		j = len(files)
	}
	return files[i:j:j]
}

// ShareCache makes x keep file contents within c, the budget it shares
// with the other indexes of its flyd, instead of one of its own. Call it
// before Run and before x is used.
func (x *Index) ShareCache(c *Cache) { x.cache.budget = c }

// Files returns the whole current snapshot, sorted by Path. It is shared:
// do not modify it.
func (x *Index) Files() []File {
	files := x.snapshot()
	return files[:len(files):len(files)]
}

// Stats returns the size and health of the index.
func (x *Index) Stats() Stats {
	cf, cb := x.cache.size()
	return Stats{
		Files:       x.Len(),
		Dirs:        int(x.nDirs.Load()),
		BuildTime:   x.buildTime,
		WatchErrors: int(x.watchErrors.Load()),
		CacheFiles:  cf,
		CacheBytes:  cb,
		Warm:        x.warmed.Load(),
	}
}

func cmpFilePath(f File, path string) int { return strings.Compare(f.Path, path) }

// abs returns the absolute path of rel.
func (x *Index) abs(rel string) string {
	if rel == "" {
		return x.root
	}
	return x.prefix + filepath.FromSlash(rel)
}

// watchFailed records a watch that could not be added. The first one is a
// warning; the rest are only counted, since they share a cause.
func (x *Index) watchFailed(rel string, err error) {
	if x.watchErrors.Add(1) == 1 {
		x.log.Warn("cannot watch directory: changes under it will be missed (raise fs.inotify.max_user_watches?)",
			indexKeyPath, rel, indexKeyErr, err)
		return
	}
	x.log.Debug("cannot watch directory", indexKeyPath, rel, indexKeyErr, err)
}

// walk lists the served files under the directory rel ("" is the root), in
// order, and the directories it watched. With watch, each worker adds a
// watch to a directory just before it reads it, so the watches are added
// in parallel too. It reads directories with a bounded pool of workers,
// which it waits for. It stats no regular file, only symlinks (to check
// where they lead). Only a failure to read rel itself is an error; other
// unreadable directories are logged and skipped.
func (x *Index) walk(rel string, watch bool) (files []File, dirs []string, err error) {
	w := &indexWalk{x: x, watch: watch}
	w.cond.L = &w.mu
	top := &walkDir{rel: rel}
	w.queue = append(w.queue, top)
	w.pending = 1
	n := walkWorkers()
	var wg sync.WaitGroup
	for range n - 1 {
		wg.Go(w.work)
	}
	w.work()
	wg.Wait()
	if top.err != nil {
		return nil, nil, top.err
	}
	nf, nd := top.count()
	files = make([]File, 0, nf)
	dirs = make([]string, 0, nd)
	files, dirs = top.appendTo(files, dirs)
	return files, dirs, nil
}

// walkWorkers is the size of the walk's worker pool. On a warm cache the
// walk is system calls bound by the CPUs (on 2 CPUs, 2 to 32 workers
// measured the same); on a cold one, workers beyond the CPUs overlap disk
// reads.
func walkWorkers() int { return 2 * runtime.GOMAXPROCS(0) }

// indexWalk is one parallel walk: a stack of directories to read and the
// number of directories queued or being read.
type indexWalk struct {
	x     *Index
	watch bool

	mu      sync.Mutex
	cond    sync.Cond
	queue   []*walkDir
	pending int
}

// walkDir is one directory of a walk: its served files and its
// subdirectories, each sorted.
type walkDir struct {
	rel     string
	files   []File
	subs    []*walkDir
	watched bool
	err     error
}

func (w *indexWalk) work() {
	var d *walkDir
	var kids []*walkDir
	var scratch []string
	for {
		w.mu.Lock()
		if d != nil {
			w.queue = append(w.queue, kids...)
			w.pending += len(kids) - 1
			if len(kids) > 0 || w.pending == 0 {
				w.cond.Broadcast()
			}
		}
		for len(w.queue) == 0 && w.pending > 0 {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		d = w.queue[len(w.queue)-1]
		w.queue[len(w.queue)-1] = nil
		w.queue = w.queue[:len(w.queue)-1]
		w.mu.Unlock()

		kids = w.read(d, &scratch)
	}
}

// read reads the directory d: it watches it first (so that a file created
// meanwhile is either read or reported), then lists its served files, by
// the type that the directory entries give. It returns the subdirectories
// to read.
func (w *indexWalk) read(d *walkDir, scratch *[]string) []*walkDir {
	x := w.x
	abs := x.abs(d.rel)
	var watchErr error
	if w.watch {
		watchErr = x.watcher.add(abs)
		d.watched = watchErr == nil
	}
	f, err := openDir(abs)
	if err != nil {
		d.err = err
		x.log.Debug("index: skip unreadable directory", indexKeyPath, d.rel, indexKeyErr, err)
		return nil
	}
	defer f.Close()
	if watchErr != nil {
		x.watchFailed(d.rel, watchErr) // a limit, since the directory is readable
	}
	ents, err := f.ReadDir(-1)
	if err != nil {
		// Keep what was read.
		x.log.Debug("index: read directory", indexKeyPath, d.rel, indexKeyErr, err)
	}
	// Directories are queued. Served names are kept and sorted: name order
	// is path order, so the files need no sort. Symlinks (rare) are also
	// remembered apart, to check where they lead.
	names := (*scratch)[:0]
	var links []string
	parent := path.Base(d.rel)
	for _, e := range ents {
		name := e.Name()
		switch typ := e.Type(); {
		case typ.IsDir():
			if !skipDirElem(parent, name) {
				d.subs = append(d.subs, &walkDir{rel: joinRel(d.rel, name)})
			}
		case typ.IsRegular():
			if x.match.servedName(parent, name) {
				names = append(names, name)
			}
		case typ&fs.ModeSymlink != 0:
			if x.match.servedName(parent, name) {
				names = append(names, name)
				links = append(links, name)
			}
		}
	}
	*scratch = names
	slices.Sort(names)
	slices.Sort(links)
	slices.SortFunc(d.subs, func(a, b *walkDir) int { return cmpPathKeys(a.rel, true, b.rel, true) })

	// The paths of a directory's files share one allocation.
	prefix := d.rel
	if prefix != "" {
		prefix += "/"
	}
	var paths strings.Builder
	n := len(prefix) * len(names)
	for _, name := range names {
		n += len(name)
	}
	paths.Grow(n)
	for _, name := range names {
		paths.WriteString(prefix)
		paths.WriteString(name)
	}
	all := paths.String()

	d.files = make([]File, 0, len(names))
	for _, name := range names {
		rel := all[:len(prefix)+len(name)]
		all = all[len(rel):]
		if len(links) > 0 && links[0] == name {
			links = links[1:]
			if f, ok := x.symlinkFile(rel); ok {
				d.files = append(d.files, f)
			}
			continue
		}
		d.files = append(d.files, File{Path: rel})
	}
	return d.subs
}

// count returns the number of files and of watched directories in the tree
// under d.
func (d *walkDir) count() (files, dirs int) {
	files = len(d.files)
	if d.watched {
		dirs = 1
	}
	for _, s := range d.subs {
		f, n := s.count()
		files += f
		dirs += n
	}
	return files, dirs
}

// appendTo appends the files of the tree under d in path order, and its
// watched directories. Each directory holds its files and subdirectories
// sorted, so merging the two (a subdirectory sorts as its path plus "/")
// gives the order of whole paths without a global sort.
func (d *walkDir) appendTo(files []File, dirs []string) ([]File, []string) {
	if d.watched {
		dirs = append(dirs, d.rel)
	}
	i, j := 0, 0
	for i < len(d.files) || j < len(d.subs) {
		if j == len(d.subs) || i < len(d.files) && cmpPathKeys(d.files[i].Path, false, d.subs[j].rel, true) < 0 {
			files = append(files, d.files[i])
			i++
			continue
		}
		files, dirs = d.subs[j].appendTo(files, dirs)
		j++
	}
	return files, dirs
}

// cmpPathKeys compares a and b, each followed by a "/" if it is a
// directory, without building those strings. Every path under directory d
// starts with d+"/", so this orders the entries of one directory as the
// whole paths under them are ordered.
func cmpPathKeys(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) > len(b):
		return -cmpPathKeys(b, bDir, a, aDir)
	case len(a) == len(b):
		return cmpBool(aDir, bDir)
	case !aDir:
		return -1 // a is a proper prefix of b
	}
	if c := cmp.Compare('/', b[n]); c != 0 {
		return c
	}
	if len(b) == n+1 && !bDir {
		return 0 // b is a+"/": not a clean path
	}
	return -1
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// rel returns the slash-separated path of name, an absolute path, relative
// to the root, and whether name is the root or inside it.
func (x *Index) rel(name string) (string, bool) {
	if name == x.root {
		return "", true
	}
	rel, ok := strings.CutPrefix(name, x.prefix)
	if !ok || rel == "" {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Resolved is where rel leads once every symlink on its way is followed:
// a path relative to the root, and whether it stays inside the root. A
// name an agent asks for may pass the rules while what it leads to does
// not (lib/l10n.json -> ../android/key.properties, lib/dk -> ../.docker):
// readers check the rules on both.
func (x *Index) Resolved(rel string) (string, bool) {
	target, err := filepath.EvalSymlinks(x.abs(rel))
	if err != nil {
		return "", false
	}
	trel, ok := x.rel(target)
	return trel, ok && trel != ""
}

// AbsPath is the absolute path of rel, a path relative to the root.
func (x *Index) AbsPath(rel string) string { return x.abs(rel) }

// symlinkFile returns the served file for the symlink rel. A symlink is
// served only if it resolves, inside the root, to a regular file that is
// itself neither a secret nor skipped.
func (x *Index) symlinkFile(rel string) (File, bool) {
	// os.Root refuses links that leave the root.
	fi, err := x.Root().Stat(filepath.FromSlash(rel))
	if err != nil || !fi.Mode().IsRegular() {
		return File{}, false
	}
	target, err := filepath.EvalSymlinks(x.abs(rel))
	if err != nil {
		return File{}, false
	}
	trel, ok := x.rel(target)
	if !ok || trel == "" {
		return File{}, false
	}
	dir, _ := path.Split(trel)
	if !servable(trel) || dir != "" && skipDir(dir[:len(dir)-1]) {
		return File{}, false
	}
	return File{Path: rel}, true
}

// statFile looks at rel on disk now: whether it is a directory, or else
// the served file there, if any.
func (x *Index) statFile(rel string) (f File, isDir, ok bool) {
	fi, err := os.Lstat(x.abs(rel))
	switch {
	case err != nil:
		return File{}, false, false
	case fi.IsDir():
		return File{}, true, false
	case !x.match.served(rel):
		return File{}, false, false
	case fi.Mode().IsRegular():
		return File{Path: rel}, false, true
	case fi.Mode()&fs.ModeSymlink != 0:
		f, ok := x.symlinkFile(rel)
		return f, false, ok
	}
	return File{}, false, false
}
