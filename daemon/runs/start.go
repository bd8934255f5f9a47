package runs

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/daemon/loginenv"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// Spec is what a run is started with.
type Spec struct {
	Kind store.Kind // what differs between kinds is in kindOptions (kinds.go)
	Root string
	Env  map[string]string // the client's environment; see runEnv
	Args []string          // after the flutter executable
	// Max bounds the live runs of Kind in Root, this one included; 0 means
	// no bound. The check and the start are one step: concurrent Starts
	// never exceed it.
	Max int
	// Command replaces flutter (an upstream MCP server). Its stdin and
	// stdout are the caller's (Run.Stdio); its stderr is the log.
	Command string
	Name    string // shown as Argv[0] instead of Command's path
	// By is the client that starts it, recorded as its first action.
	By *store.Actor
}

// Start launches flutter in its own process group, in spec.Root, with the
// client's environment (see runEnv). The process belongs to the engine:
// ctx only bounds a build or one-shot command (its cancellation kills the
// group), never a run.
func (e *Engine) Start(ctx context.Context, spec Spec) (*Run, error) {
	if err := checkArgs(spec.Args); err != nil {
		return nil, err
	}
	var envNote string
	spec.Env, envNote = e.fillEnv(spec.Env)
	exe, name, err := e.executable(spec)
	if err != nil {
		return nil, err
	}
	place, err := e.reserve(spec.Root, spec.Kind, spec.Max)
	if err != nil {
		return nil, err
	}
	defer e.release(place)
	r := e.newRun(spec, name)
	if r.opts.held && e.cfg.Holders != nil {
		if err := e.launchHeld(r, exe, spec, place); err != nil {
			return nil, fmt.Errorf("start %s under a holder: %w", exe, err)
		}
	} else {
		if r.proc, err = newProcess(ctx, exe, spec, r.id, r.opts, r.cancel); err != nil {
			return nil, err
		}
		if err := e.launch(r, place); err != nil {
			return nil, fmt.Errorf("start %s: %w", exe, err)
		}
	}
	note := fmt.Sprintf("started: %s (pid %d) in %s", strings.Join(r.rec.Argv, " "), r.proc.pid, spec.Root)
	if h := r.proc.held; h != nil {
		note += fmt.Sprintf(", held by its holder (pid %d): it outlives flyd", h.holder.PID)
		if h.why != "" {
			note += " (" + h.why + ")"
		}
	}
	r.begin(note, spec.By, store.Action{What: "start", Outcome: "pid " + strconv.Itoa(r.proc.pid)})
	if envNote != "" {
		r.note(envNote)
	}
	e.log.Info("run started", logRun, r.id, logKind, spec.Kind, logPID, r.proc.pid, "root", spec.Root, "held", r.proc.held != nil)
	e.wg.Add(1)
	go func() { // owned by the engine: ends when the process has exited, or flyd lets go of it
		defer e.wg.Done()
		if r.proc.held != nil {
			r.superviseHeld()
		} else {
			r.supervise()
		}
	}()
	return r, nil
}

// launchHeld starts r's process under a holder and registers r in the
// place it holds.
func (e *Engine) launchHeld(r *Run, exe string, spec Spec, place *reservation) error {
	p, err := startHeld(e.cfg.Holders, exe, spec, r.id)
	if err != nil {
		return err
	}
	r.proc = p
	r.rec.PID, r.rec.PIDStart, r.rec.Holder = p.pid, p.started, p.held.dir
	r.markSlot = e.marks.track(r.id)
	e.register(r, place)
	return nil
}

// maxArgvBytes bounds a run's arguments: they are a client's to choose,
// and every record keeps them, which status and the dashboard show.
const maxArgvBytes = 64 << 10

// checkArgs refuses arguments over maxArgvBytes.
func checkArgs(args []string) error {
	if n := argvBytes(args); n > maxArgvBytes {
		return fmt.Errorf("the arguments are %d bytes; at most %d are kept with a run: pass large defines with --dart-define-from-file", n, maxArgvBytes)
	}
	return nil
}

func argvBytes(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	return n
}

// executable is what spec runs, and the name its record shows as its
// first argument: spec.Command, or flutter (see findFlutter).
func (e *Engine) executable(spec Spec) (path, name string, err error) {
	switch {
	case spec.Command == "":
		path, err = e.findFlutter(spec.Env)
		return path, "flutter", err
	case spec.Name == "":
		return spec.Command, spec.Command, nil
	}
	return spec.Command, spec.Name, nil
}

// findFlutter resolves the flutter executable: --flutter, else the first
// flutter on the session's PATH (not flyd's: the editor's environment is
// the one the user set up), else the one in FLUTTER_ROOT's bin. What
// counts as the flutter executable of a directory differs by operating
// system (flutterIn: flutter on Unix, flutter.bat on Windows), and so
// does how variable names compare (envValue).
func (e *Engine) findFlutter(env map[string]string) (string, error) {
	if e.cfg.Flutter != "" {
		return e.cfg.Flutter, nil
	}
	if len(env) == 0 {
		// A session that sent no environment (an HTTP client, an old
		// shim) runs with flyd's, as runEnv does.
		env = map[string]string{"PATH": os.Getenv("PATH"), "FLUTTER_ROOT": os.Getenv("FLUTTER_ROOT"), "PATHEXT": os.Getenv("PATHEXT")}
	}
	path := envValue(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p, ok := flutterIn(dir, env); ok {
			return p, nil
		}
	}
	if root := envValue(env, "FLUTTER_ROOT"); root != "" && filepath.IsAbs(root) {
		if p, ok := flutterIn(filepath.Join(root, "bin"), env); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w on this session's PATH (%s): install Flutter (https://docs.flutter.dev/get-started/install) "+
		"and put its bin directory on the PATH your editor starts flyctl with, or set FLUTTER_ROOT, or start flyd with --flutter %s", ErrNoFlutter, path, flutterFlagExample)
}

// maxFilledNames bounds the names a run's log lists of what was filled.
const maxFilledNames = 12

// fillEnv returns a copy of a session's environment with the gaps its
// client left filled, never changing what the client passed: first from
// the user's login environment (Config.LoginEnv), then the toolchain's
// variables (wire.ToolchainEnv) from flyd's own, which a service carries.
// Clients pass their servers very different environments (Codex seven
// variables, the TypeScript SDK's stdio transport six), and a build
// without JAVA_HOME fails for reasons the agent cannot see. note says,
// once for the run's log, where its environment came from. A session
// that sent none gets flyd's whole environment (runEnv), as before.
func (e *Engine) fillEnv(env map[string]string) (map[string]string, string) {
	if len(env) == 0 {
		return env, "environment: flyd's own (the client passed none)"
	}
	out := maps.Clone(env)
	var fromLogin, fromFlyd []string
	source := ""
	if e.cfg.LoginEnv != nil {
		login, src := e.cfg.LoginEnv()
		fromLogin, source = loginenv.Fill(out, login), src
	}
	own := map[string]string{}
	for _, k := range wire.ToolchainEnv {
		if v, ok := os.LookupEnv(k); ok {
			own[k] = v
		}
	}
	fromFlyd = loginenv.Fill(out, own)
	note := fmt.Sprintf("environment: %d variables from the client", len(env))
	if len(fromLogin) > 0 {
		note += fmt.Sprintf("; %d filled in from %s: %s", len(fromLogin), source, namesList(fromLogin))
	}
	if len(fromFlyd) > 0 {
		note += fmt.Sprintf("; %d from flyd's own: %s", len(fromFlyd), namesList(fromFlyd))
	}
	return out, note
}

// namesList is names for a log line, at most maxFilledNames of them.
func namesList(names []string) string {
	if len(names) <= maxFilledNames {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxFilledNames], ", ") + fmt.Sprintf(" and %d more", len(names)-maxFilledNames)
}

// runEnv is the environment of a session's child: the client's (the
// editor's, as its shim sent it) with its gaps filled (fillEnv), not
// flyd's whole environment, whose variables come from whichever client
// happened to start it. flyd's own FLY_* settings (FLY_SOCKET,
// FLY_STATE_DIR) are left out. A session that sent no environment (an
// old shim, a bare WebSocket client) gets flyd's.
func runEnv(env map[string]string) []string {
	if len(env) == 0 {
		env = make(map[string]string)
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == flypaths.EnvSocket || k == flypaths.EnvStateDir || k == flypaths.EnvConfigDir || k == EnvMarker {
			continue // flyd's own; a child that runs flyctl finds flyd by the defaults
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// newRun is the run spec starts, before its process: its ring, its
// record, and for a flutter run its error list.
func (e *Engine) newRun(spec Spec, name string) *Run {
	id := store.NewRunID()
	r := &Run{
		id: id, kind: spec.Kind, opts: optionsOf(spec.Kind), root: spec.Root, eng: e,
		ring:     logring.New(e.ringOptions()),
		pending:  make(map[int]chan machineMsg),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		vm:       vmFollower{ready: make(chan struct{})},
		markSlot: -1,
		rec: store.Record{
			ID: id, Kind: spec.Kind, Argv: append([]string{name}, spec.Args...), Root: spec.Root,
			State: stateStarting, StartedAt: time.Now(), StartedBy: spec.By,
		},
	}
	if r.opts.errorList {
		r.errors = apperrors.NewList(apperrors.Limits{})
		r.scanner = apperrors.NewScanner(apperrors.Project{Root: spec.Root, Package: packageName(spec.Root)})
	}
	return r
}

// launch starts r's process and registers r in the place it holds. It
// holds spawn from the child's start to its registration: the reaper
// must not wait for a leader it does not know yet.
func (e *Engine) launch(r *Run, place *reservation) error {
	e.spawn.RLock()
	defer e.spawn.RUnlock()
	if err := r.proc.start(); err != nil {
		return err
	}
	r.rec.PID, r.rec.PIDStart = r.proc.pid, r.proc.started
	r.markSlot = e.marks.track(r.id)
	e.register(r, place)
	return nil
}

// begin records a run that has just started or attached: note is its
// first line; its record is on disk before Start or Attach returns, on
// the caller's goroutine (if flyd dies, the next one must find the run
// to kill its process group); first is by's action, if by is known.
func (r *Run) begin(note string, by *store.Actor, first store.Action) {
	r.note(note)
	if db := r.eng.db; db != nil {
		if err := db.PutRun(r.record()); err != nil {
			r.eng.log.Warn("save run record", logRun, r.id, logErr, err)
		}
	}
	if by != nil {
		first.By = *by
		r.logAction(first)
	}
	r.announce()
}
