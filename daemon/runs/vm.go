package runs

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/daemon/vmservice"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// A live `flutter run` in debug mode reports its VM service (through DDS)
// in app.debugPort. The run follows it on one connection, which every
// client shares through the run: the framework's errors, which flutter
// run --machine never prints, become entries of the log (stream error)
// and of the run's error list.

// vmFollower is a run's VM-service connection goroutine: followVM starts
// it, stop ends it and waits.
type vmFollower struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   bool
}

// Errors returns the run's error list, nil for anything but a flutter
// run started by this flyd.
func (r *Run) Errors() *apperrors.List { return r.errors }

func newErrorList(spec Spec) *apperrors.List {
	if spec.Kind != store.KindRun {
		return nil
	}
	return apperrors.NewList(apperrors.Limits{})
}

// vmRetry is how long the follower waits before it connects again after
// losing the VM service while the run lives.
const vmRetry = time.Second

// followVM starts following the VM service at uri, once per run; a later
// URI (another app.debugPort) replaces the first.
func (r *Run) followVM(uri string) {
	if r.errors == nil {
		return
	}
	if _, err := vmservice.WebSocketURI(uri); err != nil {
		r.note("not following the app's VM service: " + err.Error())
		return
	}
	f := &r.vm
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if f.cancel != nil {
		f.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	project := apperrors.Project{Root: r.root, Package: packageName(r.root)}
	f.wg.Go(func() { // owned by the run: stop cancels it and waits
		seen := newSeenSet(4096)
		for {
			err := r.watchVM(ctx, uri, project, seen)
			if ctx.Err() != nil {
				return
			}
			r.eng.log.Debug("vm service connection ended", logRun, r.id, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(vmRetry):
			}
		}
	})
}

// stop ends the follower and waits for it; later followVM calls do
// nothing.
func (f *vmFollower) stop() {
	f.mu.Lock()
	f.done = true
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// watchVM follows one connection until it ends or ctx is done. DDS
// replays the history of Extension on streamListen, and again after a
// reconnect: seen drops what was already taken (dart mcp-server and
// package:dds_service_extensions dedupe by timestamp alone, which also
// drops distinct errors of one millisecond).
func (r *Run) watchVM(ctx context.Context, uri string, project apperrors.Project, seen *seenSet) error {
	c, err := vmservice.Dial(ctx, uri, vmservice.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for _, s := range []string{"Extension", "Isolate"} {
		if err := c.StreamListen(ctx, s); err != nil {
			return err
		}
	}
	// The same error can come twice in one millisecond: an event's key is
	// its time, its data and how many such came before it on this
	// connection, which a replay repeats in the same order.
	occurrences := map[string]int{}
	for e := range c.Events() {
		if e.StreamID != "Extension" || e.ExtensionKind != "Flutter.Error" {
			continue
		}
		h := fnv.New64a()
		h.Write(e.ExtensionData)
		key := strconv.FormatInt(e.Timestamp, 10) + ":" + strconv.FormatUint(h.Sum64(), 16)
		occurrences[key]++
		if !seen.add(key + "#" + strconv.Itoa(occurrences[key])) {
			continue
		}
		fe, err := apperrors.ParseEvent(e.ExtensionData, project)
		if err != nil {
			continue
		}
		at := time.UnixMilli(e.Timestamp)
		if e.Timestamp <= 0 {
			at = time.Now()
		}
		r.errors.Add(fe, at)
		text := fe.Text
		if text == "" {
			text = fe.Summary
		}
		r.append(logring.Error, text)
	}
	if err := c.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// seenSet remembers the last n keys.
type seenSet struct {
	keys  map[string]bool
	order []string
	n     int
}

func newSeenSet(n int) *seenSet { return &seenSet{keys: map[string]bool{}, n: n} }

// add reports whether key is new, and remembers it.
func (s *seenSet) add(key string) bool {
	if s.keys[key] {
		return false
	}
	s.keys[key] = true
	s.order = append(s.order, key)
	if len(s.order) > s.n {
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
	return true
}

// packageName is the name in root's pubspec.yaml, read through an
// os.Root and bounded; "" when there is none.
func packageName(root string) string {
	fsys, err := os.OpenRoot(root)
	if err != nil {
		return ""
	}
	defer fsys.Close()
	f, err := fsys.Open("pubspec.yaml")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "name:"); ok {
			name = strings.TrimSpace(name)
			if i := strings.IndexByte(name, '#'); i >= 0 {
				name = strings.TrimSpace(name[:i])
			}
			return strings.Trim(name, `"'`)
		}
	}
	return ""
}
