package runs

import (
	"context"
	"errors"
	"fmt"
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

	readyOnce sync.Once
	ready     chan struct{} // closed once the first connection has listened and taken the history
}

// markReady closes ready, once.
func (f *vmFollower) markReady() { f.readyOnce.Do(func() { close(f.ready) }) }

// VMReady is closed once flyd follows the app's VM service (it listens
// and has taken what came before), and when the run ends. A run without
// one (release mode, not a flutter run) never closes it before its end.
func (r *Run) VMReady() <-chan struct{} { return r.vm.ready }

// vmMaxAnswer bounds the answer of a look into the app (a screenshot, a
// widget tree), read one at a time per run: room for the base64 PNG of a
// large screen's screenshot (a 1440×3200 phone's runs to 3–4 MB), which
// the connection's 4 MiB for everything else would refuse by ending it.
const vmMaxAnswer = 24 << 20

// vmReadyWait bounds how long a reload waits for the VM-service
// connection of a run that has just started, so that its frames and
// errors are seen live.
const vmReadyWait = 2 * time.Second

// Errors returns the run's error list: that of a flutter run or an
// attached app of this flyd, still there a while after it ended (the
// last runs' lists are kept in memory); nil for other kinds, and for a
// run whose list is no longer kept.
func (r *Run) Errors() *apperrors.List { return r.errors }

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
		var app vmIdentity // the app's, from the first connection
		failed := 0        // dials in a row that found nobody, or not the app
		for {
			found, err := r.watchVM(ctx, uri, project, seen, &app)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errNotTheApp) {
				// Whoever listens at the address now is not the app (its
				// port was taken by another process, maybe another
				// user's): nothing it says is the app's.
				r.note("stopped following the app's VM service: " + err.Error())
				if r.kind == store.KindApp {
					r.appGone(endReplaced)
				}
				return
			}
			if failed = failed + 1; found {
				failed = 0
			}
			if r.kind == store.KindApp && failed >= appGoneAfter {
				r.appGone(endGone) // an app flyd follows but did not start: it has ended
				return
			}
			r.eng.log.Debug("vm service connection ended", logRun, r.id, logErr, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(vmRetry):
			}
		}
	})
}

// vmIdentity is what tells one Dart VM from another at the same address:
// the process and the moment it started, as getVM gives them. A VM that
// gives neither is told by its isolates (see same).
type vmIdentity struct {
	PID       int64                  `json:"pid"`
	StartTime int64                  `json:"startTime"`
	Isolates  []vmservice.IsolateRef `json:"isolates"`
}

// errNotTheApp: the VM service at the run's address is not the one the
// run followed.
var errNotTheApp = errors.New("another VM service answers at its address")

// same reports whether the VM now answering is the one known: the same
// process and start, or (for a VM that gives neither) one of the same
// isolates. A first connection (known is zero) is the app.
func (known *vmIdentity) same(now vmIdentity) bool {
	switch {
	case known.PID == 0 && known.StartTime == 0 && known.Isolates == nil:
		return true
	case known.PID != 0 || known.StartTime != 0:
		return now.PID == known.PID && now.StartTime == known.StartTime
	}
	for _, a := range known.Isolates {
		for _, b := range now.Isolates {
			if a.ID == b.ID {
				return true
			}
		}
	}
	return false
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
	f.markReady() // nothing more to wait for
}

// vmState is what a run's VM-service connection has learnt: the app's UI
// isolate (a hot restart replaces it) and the services flutter_tools
// registered (s0.reloadSources, …), for calls into the app.
type vmState struct {
	mu         sync.Mutex
	conn       *vmservice.Conn   // the connection while it is up; nil otherwise
	isolate    string            // the UI isolate's id; "" while there is none
	services   map[string]string // service name → method to call it by
	extensions map[string]bool   // the UI isolate's service extensions (ext.flutter.…)
	added      chan struct{}     // closed and replaced when an extension or isolate is added

	// The follower's only: an attached app's partial output lines, and
	// the bound on its lines a second.
	stdout, stderr string
	outWindow      time.Time
	outLines       int
	outDropped     int
}

// Errors of calls into the app.
var (
	// ErrNoVMService: the run has no VM service (a release build, or not
	// a flutter run), or flyd is not connected to it right now.
	ErrNoVMService = errors.New("no VM service")
	// ErrNoExtension: the app did not register the service extension in
	// time (profile builds have no inspector).
	ErrNoExtension = errors.New("the app has not registered this service extension")
)

// Mode is the build mode flutter reported in app.start: debug, profile
// or release ("" until then).
func (r *Run) Mode() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mode
}

// CallVM calls method on the app's VM service over the run's shared
// connection, decoding the result into result. Service extensions
// (ext.…) go to the UI isolate, and wait up to wait for the app to
// register them (an app that has just started or restarted); they fail
// with ErrNoExtension after it. Without a connection it fails with
// ErrNoVMService.
func (r *Run) CallVM(ctx context.Context, method string, params map[string]any, wait time.Duration, result any) error {
	return r.callVM(ctx, method, params, wait, result, false)
}

// LookVM is CallVM for a look into the app whose answer may be large (a
// screenshot, a widget tree): up to vmMaxAnswer bytes, one such call at a
// time per run (the others wait their turn within ctx).
func (r *Run) LookVM(ctx context.Context, method string, params map[string]any, wait time.Duration, result any) error {
	return r.callVM(ctx, method, params, wait, result, true)
}

func (r *Run) callVM(ctx context.Context, method string, params map[string]any, wait time.Duration, result any, large bool) error {
	deadline := time.Now().Add(wait)
	for {
		v := &r.vmState
		v.mu.Lock()
		c, iso, has, added := v.conn, v.isolate, v.extensions[method], v.added
		if added == nil {
			v.added = make(chan struct{})
			added = v.added
		}
		v.mu.Unlock()
		ext := strings.HasPrefix(method, "ext.")
		if c != nil && (!ext || (iso != "" && has)) {
			if ext {
				p := map[string]any{"isolateId": iso}
				for k, val := range params {
					p[k] = val
				}
				params = p
			}
			if large {
				return c.CallLarge(ctx, method, params, result, vmMaxAnswer)
			}
			return c.Call(ctx, method, params, result)
		}
		left := time.Until(deadline)
		if left <= 0 {
			if c == nil {
				return ErrNoVMService
			}
			return ErrNoExtension
		}
		t := time.NewTimer(left)
		select {
		case <-added:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-r.done:
			t.Stop()
			return fmt.Errorf("run %s: %w", r.id, ErrRunEnded)
		}
		t.Stop()
	}
}

// changedLocked wakes the callers waiting for an extension; v.mu is held.
func (v *vmState) changedLocked() {
	if v.added != nil {
		close(v.added)
		v.added = nil
	}
}

// setConn records the connection (nil when it ends).
func (v *vmState) setConn(c *vmservice.Conn) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.conn = c
	if c == nil {
		v.isolate = ""
		v.extensions = nil
	}
	v.changedLocked()
}

// setExtensions records the UI isolate's extensions, from getIsolate.
func (v *vmState) setExtensions(iso string, exts []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if iso != v.isolate {
		return
	}
	v.extensions = map[string]bool{}
	for _, e := range exts[:min(len(exts), 512)] {
		v.extensions[e] = true
	}
	v.changedLocked()
}

// Isolate is the id of the app's UI isolate, "" while none is known (a
// hot restart is replacing it, or the VM service is not connected).
func (r *Run) Isolate() string {
	r.vmState.mu.Lock()
	defer r.vmState.mu.Unlock()
	return r.vmState.isolate
}

// ServiceMethod is the method by which to call a service registered on
// the app's VM service (reloadSources → s0.reloadSources), "" if none is.
func (r *Run) ServiceMethod(service string) string {
	r.vmState.mu.Lock()
	defer r.vmState.mu.Unlock()
	return r.vmState.services[service]
}

func (v *vmState) setIsolate(id string) {
	v.mu.Lock()
	if id != v.isolate {
		v.extensions = nil
	}
	v.isolate = id
	v.changedLocked()
	v.mu.Unlock()
}

// isolateEvent follows the UI isolate: a hot restart ends the old one
// and starts a new one, both named main.
func (v *vmState) isolateEvent(e vmservice.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch e.Kind {
	case "IsolateStart", "IsolateRunnable":
		if e.Isolate.Name == "main" || v.isolate == "" {
			if e.Isolate.ID != v.isolate {
				v.extensions = nil // a new isolate registers its extensions anew
			}
			v.isolate = e.Isolate.ID
		}
	case "IsolateExit":
		if e.Isolate.ID == v.isolate {
			v.isolate = ""
			v.extensions = nil
		}
	case "ServiceExtensionAdded":
		if e.Isolate.ID == v.isolate && e.Extension != "" && len(v.extensions) < 512 {
			if v.extensions == nil {
				v.extensions = map[string]bool{}
			}
			v.extensions[e.Extension] = true
		}
	}
	v.changedLocked()
}

func (v *vmState) serviceEvent(e vmservice.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch e.Kind {
	case "ServiceRegistered":
		if v.services == nil {
			v.services = map[string]string{}
		}
		if len(v.services) < 64 {
			v.services[e.Service] = e.Method
		}
	case "ServiceUnregistered":
		delete(v.services, e.Service)
	}
}

// vmStreams are the streams a run follows: Extension for the framework's
// errors and frames, Isolate for the UI isolate across hot restarts,
// Service for flutter_tools' reload services, Stderr for what the app
// writes there (a flutter run already relays it in app.log, so it is not
// logged twice).
//
// Service and Isolate come first: DDS replays on a listen, and a long
// Extension history replayed first could use up the events a second
// keeps before the registrations arrive.
var vmStreams = []string{"Service", "Isolate", "Stderr", "Extension"}

// watchVM follows one connection until it ends or ctx is done. DDS
// replays the history of Extension on streamListen (and again after a
// reconnect), and getStreamHistory returns it too: seen drops what was
// already taken (dart mcp-server and package:dds_service_extensions
// dedupe by timestamp alone, which also drops distinct errors of one
// millisecond).
//
// found is true once the VM at uri has shown itself to be the app (app
// is filled in by the first connection and checked by the later ones):
// a peer that accepts and closes, or fails getVM, has not.
func (r *Run) watchVM(ctx context.Context, uri string, project apperrors.Project, seen *seenSet, app *vmIdentity) (found bool, err error) {
	c, err := vmservice.Dial(ctx, uri, vmservice.Options{})
	if err != nil {
		return false, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer r.vmState.setConn(nil)
	var vm vmIdentity
	if err := c.Call(ctx, "getVM", nil, &vm); err != nil {
		return false, err
	}
	if !app.same(vm) {
		return false, fmt.Errorf("%w (pid %d started at %d, not pid %d started at %d)", errNotTheApp, vm.PID, vm.StartTime, app.PID, app.StartTime)
	}
	if app.PID == 0 && app.StartTime == 0 && app.Isolates == nil {
		*app = vm
		app.Isolates = vm.Isolates[:min(len(vm.Isolates), 16)]
		if app.Isolates == nil {
			app.Isolates = []vmservice.IsolateRef{}
		}
	}
	found = true
	for _, iso := range vm.Isolates[:min(len(vm.Isolates), 64)] {
		if iso.Name == "main" || r.Isolate() == "" {
			r.vmState.setIsolate(iso.ID)
		}
	}
	r.loadExtensions(ctx, c)
	streams := vmStreams
	if r.kind == store.KindApp {
		streams = append(streams[:len(streams):len(streams)], "Stdout") // its output reaches fly only here
	}
	for _, s := range streams {
		if err := c.StreamListen(ctx, s); err != nil {
			return found, err
		}
	}
	// The same error can come twice in one millisecond: an event's key is
	// its time, its data and how many such came before it from the same
	// source, which a replay repeats in the same order.
	fromHistory, fromStream := map[string]int{}, map[string]int{}
	if history, err := c.StreamHistory(ctx, "Extension"); err == nil { // not DDS: no history
		for _, e := range history {
			r.vmEvent(e, project, seen, fromHistory, false)
		}
	}
	handle := func(e vmservice.Event) {
		r.vmEvent(e, project, seen, fromStream, true)
		if e.StreamID == "Isolate" && e.Kind == "IsolateRunnable" {
			r.loadExtensions(ctx, c) // a round trip; events wait in the connection's buffer
		}
	}
	// What the listens replayed (the services flutter_tools registered)
	// came before the history's answer, so it is queued now: take it
	// before calling the connection ready, or a reload right after an
	// attach would find no reload service.
	for n := c.Queued(); n > 0; n-- {
		if e, ok := c.Poll(); ok {
			handle(e)
		}
	}
	r.vmState.setConn(c)
	r.vm.markReady()
	for e, ok := c.Next(ctx); ok; e, ok = c.Next(ctx) { // a cancel stops it at once, whatever is queued
		handle(e)
	}
	r.flushDropped()
	if err := c.Err(); err != nil && !errors.Is(err, io.EOF) {
		return found, err
	}
	return found, nil
}

// loadExtensions reads the UI isolate's service extensions.
func (r *Run) loadExtensions(ctx context.Context, c *vmservice.Conn) {
	iso := r.Isolate()
	if iso == "" {
		return
	}
	var res struct {
		ExtensionRPCs []string `json:"extensionRPCs"`
	}
	if c.Call(ctx, "getIsolate", map[string]any{"isolateId": iso}, &res) == nil {
		r.vmState.setExtensions(iso, res.ExtensionRPCs)
	}
}

// vmEvent applies one event of the app's VM service to the run; live is
// false for the history DDS keeps.
func (r *Run) vmEvent(e vmservice.Event, project apperrors.Project, seen *seenSet, occurrences map[string]int, live bool) {
	switch e.StreamID {
	case "Isolate":
		r.vmState.isolateEvent(e)
		return
	case "Service":
		r.vmState.serviceEvent(e)
		return
	case "Stdout", "Stderr":
		if r.kind == store.KindApp && live { // a flutter run of flyd's relays it in app.log already
			r.appOutput(e.StreamID, e.Text, e.TextCut)
		}
		return
	case "Extension":
	default:
		return
	}
	switch e.ExtensionKind {
	case "Flutter.Frame", "Flutter.FirstFrame":
		// A frame is news only if it is newer than every frame seen: the
		// history and DDS's replay of it are not (the device's clock
		// need not agree with this machine's, so no other time is used).
		r.frames.seen(e.Timestamp, live)
		return
	case "Flutter.Error":
	default:
		return
	}
	h := fnv.New64a()
	h.Write(e.ExtensionData)
	key := strconv.FormatInt(e.Timestamp, 10) + ":" + strconv.FormatUint(h.Sum64(), 16)
	occurrences[key]++
	if !seen.add(key + "#" + strconv.Itoa(occurrences[key])) {
		return
	}
	fe, err := apperrors.ParseEvent(e.ExtensionData, project)
	if err != nil {
		return
	}
	at := time.UnixMilli(e.Timestamp)
	if e.Timestamp <= 0 {
		at = time.Now()
	}
	r.addError(fe, at, live || at.After(r.quietBefore))
}

// appLinesPerSecond bounds the lines of an attached app's output kept
// each second (each at most maxLine bytes, an event's text at most the
// connection's MaxEventData): the rest are dropped and counted in a note.
// A flutter run's output reaches flyd through a pipe, which holds the app
// back when flyd falls behind; a VM service's does not.
const appLinesPerSecond = 1000

// appOutput adds what an attached app wrote to the log, a line an entry:
// the engine sends a print's text and its newline as two events, so a
// partial line waits for the rest (at most maxLine bytes).
func (r *Run) appOutput(streamID, text string, cut bool) {
	v := &r.vmState
	stream, buf := logring.Stdout, &v.stdout
	if streamID == "Stderr" {
		stream, buf = logring.Stderr, &v.stderr
	}
	if cut {
		text += " …\n" // the rest of the write was not kept
	}
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			*buf += text[:min(len(text), maxLine+1-len(*buf))]
			break
		}
		line := *buf + text[:min(i, maxLine+1)]
		*buf, text = "", text[i+1:]
		if !r.admitLine() {
			n := strings.Count(text, "\n") // the rest of this write goes the same way
			v.outDropped += n
			text = text[strings.LastIndexByte(text, '\n')+1:]
			continue
		}
		r.appLine(stream, strings.TrimSuffix(line, "\r"))
	}
	if len(*buf) > maxLine {
		if r.admitLine() {
			r.appLine(stream, (*buf)[:maxLine]+" …")
		}
		*buf = ""
	}
}

// appLine adds one line of an attached app's output, cut to maxLine.
func (r *Run) appLine(stream logring.Stream, line string) {
	if len(line) > maxLine {
		line = line[:maxLine] + " …"
	}
	r.append(stream, line)
	if r.scanner != nil {
		for _, e := range r.scanner.Text(line, stream == logring.Stderr, "") {
			r.addError(e, time.Now(), false)
		}
	}
}

// admitLine counts a line of an attached app's output against the
// second's budget and reports whether it is kept; a dropped one is
// counted. The first line of a new second notes what the last dropped.
func (r *Run) admitLine() bool {
	v := &r.vmState
	if now := time.Now(); now.Sub(v.outWindow) >= time.Second {
		r.flushDropped()
		v.outWindow, v.outLines = now, 0
	}
	if v.outLines >= appLinesPerSecond {
		v.outDropped++
		return false
	}
	v.outLines++
	return true
}

// flushDropped notes the lines of output dropped since the last note.
func (r *Run) flushDropped() {
	v := &r.vmState
	if v.outDropped > 0 {
		r.note(fmt.Sprintf("%d lines of the app's output were dropped: over %d lines a second", v.outDropped, appLinesPerSecond))
		v.outDropped = 0
	}
}

// addError adds an error of the app to the run's list and, when logText,
// its text to the log as an entry of the error stream (an error found in
// the app's output is in the log already).
func (r *Run) addError(fe apperrors.Error, at time.Time, logText bool) {
	r.errors.Add(fe, at)
	if !logText {
		return
	}
	text := fe.Text
	if text == "" {
		text = fe.Summary
	}
	r.append(logring.Error, text)
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
