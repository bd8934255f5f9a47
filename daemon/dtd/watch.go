package dtd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/vmservice"
	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fsnotify/fsnotify"
)

// App is a Flutter app a DTD lists: one that runs outside fly.
type App struct {
	ID           string    // stable while the app runs: derived from its VM-service URI
	Name         string    // as its DTD registration names it
	IDE          string    // the IDE that runs it, when its DTD file says
	Workspace    string    // the served workspace it belongs to
	Root         string    // the DTD's workspace root (the workspace or a folder in it)
	VMServiceURI string    // a DDS URI, usually
	DTDPID       int       // the DTD's process
	Since        time.Time // when fly found it
}

// AppID is the stable id of the app at a VM-service URI.
func AppID(vmServiceURI string) string {
	sum := sha256.Sum256([]byte(vmServiceURI))
	return "app-" + hex.EncodeToString(sum[:5])
}

// Config is what a Watcher is given. Zero durations mean the defaults.
type Config struct {
	Dir string // see Dir
	// Served returns the served workspace that contains root, if any.
	Served func(root string) (string, bool)
	// Changed is told when apps came or went. It must not block.
	Changed func()
	Log     *slog.Logger
	Rescan  time.Duration // the whole directory, for files whose process died (default 5 s)
	Retry   time.Duration // reconnecting to a DTD (default 1 s)
}

// Bounds.
const (
	maxFiles = 256     // DTD files read per scan: names of live processes of the user's
	maxNames = 100_000 // names listed per scan, whatever they are
	maxApps  = 64      // apps kept per DTD

)

// Watcher follows the DTD directory and the DTDs of served workspaces.
// Create it with Start; Close stops every goroutine it started.
type Watcher struct {
	cfg    Config
	user   owner.User
	rescan chan struct{}
	stop   context.CancelFunc
	wg     sync.WaitGroup

	scans atomic.Int64 // full scans of the directory, for tests

	mu      sync.Mutex
	dtds    map[string]*follower // by file name
	apps    map[string]App       // by id
	closing bool
}

// follower is one DTD's connection goroutine.
type follower struct {
	info   Info
	cancel context.CancelFunc
	done   chan struct{}
}

// Start creates the directory if need be (0700) and begins watching it.
func Start(cfg Config) (*Watcher, error) {
	if cfg.Rescan <= 0 {
		cfg.Rescan = 5 * time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := private(cfg.Dir, owner.Current()); err != nil {
		return nil, err
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fw.Add(cfg.Dir); err != nil {
		fw.Close()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &Watcher{cfg: cfg, user: owner.Current(), rescan: make(chan struct{}, 1), stop: stop,
		dtds: map[string]*follower{}, apps: map[string]App{}}
	w.wg.Go(func() { // owned by the watcher: Close cancels ctx and waits
		defer fw.Close()
		w.run(ctx, fw)
	})
	return w, nil
}

// Close stops watching and every DTD connection, and waits for them.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
}

// Rescan asks for a scan of the directory now: a workspace was opened.
func (w *Watcher) Rescan() {
	select {
	case w.rescan <- struct{}{}:
	default:
	}
}

// Apps returns the apps found, in workspace then id order.
func (w *Watcher) Apps() []App {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]App, 0, len(w.apps))
	for _, a := range w.apps {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b App) int {
		if c := strings.Compare(a.Workspace, b.Workspace); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// App returns the app of id.
func (w *Watcher) App(id string) (App, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.apps[id]
	return a, ok
}

// private checks that dir is a directory of user's that no one else can
// write: anyone who can write there can name a DTD for flyd to follow,
// or hide the real ones.
func private(dir string, user owner.User) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if mine, err := user.Owns(dir, fi); err != nil {
		return err
	} else if !mine {
		o, _ := owner.Of(dir, fi)
		return fmt.Errorf("%s is not this user's (owner %s)", dir, o.Name)
	}
	if shared, err := owner.OthersCanWrite(dir, fi); err != nil {
		return err
	} else if shared {
		return fmt.Errorf("%s can be written by others (mode %v): run chmod go-w on it", dir, fi.Mode().Perm())
	}
	return nil
}

func (w *Watcher) run(ctx context.Context, fw *fsnotify.Watcher) {
	tick := time.NewTicker(w.cfg.Rescan)
	defer tick.Stop()
	defer w.stopAll()
	w.scan(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-fw.Events:
			// One change costs the one name it names: a file touched in a
			// loop, or thousands of names written, never a scan apiece.
			if e.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) != 0 {
				w.scanOne(ctx, filepath.Base(e.Name))
			}
		case err := <-fw.Errors:
			w.cfg.Log.Debug("dtd directory watch", logkey.Error, err)
		case <-tick.C:
			w.scan(ctx)
		case <-w.rescan:
			w.scan(ctx)
		}
	}
}

// candidates lists the names in the directory that can be DTD files:
// a pid of a live process of the user's, at most maxFiles of them, read
// past any number of other names (at most maxNames in all).
func (w *Watcher) candidates() []string {
	if err := private(w.cfg.Dir, w.user); err != nil {
		w.cfg.Log.Warn("dtd directory refused", logkey.Error, err)
		return nil
	}
	d, err := os.Open(w.cfg.Dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	var out []string
	for listed := 0; len(out) < maxFiles && listed < maxNames; {
		names, err := d.Readdirnames(1024)
		listed += len(names)
		for _, name := range names {
			if pid, err := strconv.Atoi(name); err == nil && pid > 0 && strconv.Itoa(pid) == name && w.user.Runs(pid) && len(out) < maxFiles {
				out = append(out, name)
			}
		}
		if err != nil {
			break
		}
	}
	return out
}

// scan reads every file of the directory and makes the followers match:
// one per accepted file, none for the others.
func (w *Watcher) scan(ctx context.Context) {
	w.scans.Add(1)
	want := map[string]Info{}
	if root, err := os.OpenRoot(w.cfg.Dir); err == nil {
		for _, name := range w.candidates() {
			if in, ok := w.read(root, name); ok {
				want[name] = in
			}
		}
		root.Close()
	}
	w.reconcile(ctx, want, func(string) bool { return true })
}

// scanOne makes the follower of the file name match it, whatever the
// other files: a change fsnotify told of.
func (w *Watcher) scanOne(ctx context.Context, name string) {
	want := map[string]Info{}
	if pid, err := strconv.Atoi(name); err == nil && strconv.Itoa(pid) == name && pid > 0 && w.user.Runs(pid) {
		if root, err := os.OpenRoot(w.cfg.Dir); err == nil {
			if in, ok := w.read(root, name); ok {
				want[name] = in
			}
			root.Close()
		}
	}
	w.reconcile(ctx, want, func(n string) bool { return n == name })
}

// read is the file name as a DTD's of a served workspace.
func (w *Watcher) read(root *os.Root, name string) (Info, bool) {
	in, err := Read(root, name, w.user)
	if err != nil {
		w.cfg.Log.Debug("dtd file ignored", "file", name, logkey.Error, err)
		return Info{}, false
	}
	_, ok := w.cfg.Served(in.WorkspaceRoot)
	return in, ok
}

// reconcile makes the followers of the names covered match want: one per
// wanted file, none for the others.
func (w *Watcher) reconcile(ctx context.Context, want map[string]Info, covered func(name string) bool) {
	w.mu.Lock()
	var stale []*follower
	for name, f := range w.dtds {
		if !covered(name) {
			continue
		}
		if in, ok := want[name]; !ok || in != f.info {
			stale = append(stale, f)
			delete(w.dtds, name)
		}
	}
	w.mu.Unlock()
	for _, f := range stale {
		f.cancel()
		<-f.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return
	}
	for name, in := range want {
		if _, ok := w.dtds[name]; ok || len(w.dtds) >= maxFiles {
			continue
		}
		fctx, cancel := context.WithCancel(ctx)
		f := &follower{info: in, cancel: cancel, done: make(chan struct{})}
		w.dtds[name] = f
		w.wg.Go(func() { // owned by the watcher: scan or Close cancels it and waits
			defer close(f.done)
			w.follow(fctx, in)
		})
	}
}

func (w *Watcher) stopAll() {
	w.mu.Lock()
	fs := make([]*follower, 0, len(w.dtds))
	for _, f := range w.dtds {
		fs = append(fs, f)
	}
	w.dtds = map[string]*follower{}
	w.mu.Unlock()
	for _, f := range fs {
		f.cancel()
		<-f.done
	}
}

// follow keeps the apps of one DTD while ctx lives, reconnecting after
// cfg.Retry when the connection drops.
func (w *Watcher) follow(ctx context.Context, in Info) {
	defer w.setApps(in, nil)
	for {
		err := w.watchDTD(ctx, in)
		if ctx.Err() != nil {
			return
		}
		w.cfg.Log.Debug("dtd connection ended", "uri", in.WSURI, logkey.Error, err)
		w.setApps(in, nil)
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.cfg.Retry):
		}
	}
}

// vmServiceEntry is one app of ConnectedApp (the reference's §4.4).
type vmServiceEntry struct {
	URI        string  `json:"uri"`
	ExposedURI *string `json:"exposedUri"`
	Name       string  `json:"name"`
}

// watchDTD listens to ConnectedApp first (it does not replay), then asks
// for the apps, then follows them until the connection ends.
func (w *Watcher) watchDTD(ctx context.Context, in Info) error {
	c, err := vmservice.Dial(ctx, in.WSURI, vmservice.Options{MaxMessage: 1 << 20, EventsPerSecond: 100, EventBuffer: 256,
		BytesPerSecond: 1 << 20, EventBytes: 1 << 20, MaxEventData: 64 << 10})
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.StreamListen(ctx, "ConnectedApp"); err != nil {
		return err
	}
	var res struct {
		VMServices []vmServiceEntry `json:"vmServices"`
	}
	if err := c.Call(ctx, "ConnectedApp.getVmServices", map[string]any{}, &res); err != nil {
		return err
	}
	apps := map[string]vmServiceEntry{}
	for _, s := range res.VMServices {
		if len(apps) < maxApps {
			apps[s.URI] = s
		}
	}
	w.setApps(in, apps)
	for e, ok := c.Next(ctx); ok; e, ok = c.Next(ctx) {
		if e.StreamID != "ConnectedApp" {
			continue
		}
		var s vmServiceEntry
		if json.Unmarshal(e.ExtensionData, &s) != nil || s.URI == "" {
			continue
		}
		switch e.Kind {
		case "VmServiceRegistered":
			if len(apps) < maxApps {
				apps[s.URI] = s
			}
		case "VmServiceUnregistered":
			delete(apps, s.URI)
		default:
			continue
		}
		w.setApps(in, apps)
	}
	return c.Err()
}

// setApps makes the apps of the DTD in the ones listed (none when nil):
// only loopback VM services, each under its stable id.
func (w *Watcher) setApps(in Info, listed map[string]vmServiceEntry) {
	ws, _ := w.cfg.Served(in.WorkspaceRoot)
	w.mu.Lock()
	changed := false
	keep := map[string]bool{}
	for uri, s := range listed {
		if _, err := vmservice.WebSocketURI(uri); err != nil {
			continue // a VM service not on this machine's loopback
		}
		id := AppID(uri)
		keep[id] = true
		if _, ok := w.apps[id]; ok {
			continue
		}
		w.apps[id] = App{ID: id, Name: bound(s.Name, 128), IDE: in.IDEName, Workspace: ws, Root: in.WorkspaceRoot,
			VMServiceURI: uri, DTDPID: in.PID, Since: time.Now()}
		changed = true
	}
	for id, a := range w.apps {
		if a.DTDPID == in.PID && a.Root == in.WorkspaceRoot && !keep[id] {
			delete(w.apps, id)
			changed = true
		}
	}
	w.mu.Unlock()
	if changed {
		w.cfg.Changed()
	}
}
