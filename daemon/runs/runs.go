// Package runs owns the flutter processes flyd starts (flutter run
// --machine, flutter build, one-shot commands): their process groups, the
// --machine protocol, their log rings, their records and persisted logs in
// the store, limits per workspace, and what happens to them when flyd
// stops or crashes. It speaks flutter, not MCP: it does not import the
// go-sdk or the daemon, and nothing outside it takes its locks or reads
// its runs from the store.
//
// Its files by job: the engine (engine.go: the registry, open, close,
// lookup, limits; start.go: Start's steps), a run (run.go, and api.go for
// what callers read of it), its process (process.go, the one owner of
// the operating system's process; supervise.go: waiting, ending,
// stopping; executable_unix.go and executable_windows.go: finding
// flutter, and which command lines may be run; reap.go: what leaves a
// run's process group), its output (output.go: read, split, --machine events into
// the ring; machine.go: the protocol; failure.go: what flutter said went
// wrong, as a person reads it), and the kinds of process
// (kinds.go, then kind_run.go, kind_attach.go, kind_build.go,
// kind_upstream.go, and kind_app.go for an app flyd did not start).
package runs

import (
	"errors"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/store"
)

// Run states, from store.
const (
	stateStarting    = store.StateStarting
	stateRunning     = store.StateRunning
	stateStopped     = store.StateStopped
	stateExited      = store.StateExited
	stateFailed      = store.StateFailed
	stateInterrupted = store.StateInterrupted
	stateCancelled   = store.StateCancelled
)

// Log attribute keys of the runs engine.
const (
	logRun  = "run"
	logKind = "kind"
	logPID  = "pid"
	logErr  = logkey.Error
)

// crashSeqJump is how far past its last stored seq an interrupted run's
// log continues after a crash when the seq marks cannot say how far it got
// (see seqMarks). It exceeds what can be published without being stored
// (the store's default queue of 8192 plus one batch of 256), so no seq is
// reused; readers see the jump as one gap, and the note says "up to".
const crashSeqJump = 1 << 14

// maxLine is the longest output line kept whole; longer ones are cut and
// flagged, and the rest of the line is skipped without being buffered.
const maxLine = 8 << 10

// Errors a caller may branch on.
var (
	ErrNoFlutter  = errors.New("flutter not found")
	ErrRunEnded   = errors.New("the run has ended")
	ErrNoSuchRun  = errors.New("no such run")
	ErrNotStarted = errors.New("the app has not started yet")
	ErrClosed     = errors.New("flyd is shutting down")
)

// Config is what the engine is told at start. Zero values mean the
// defaults of flyd's flags.
type Config struct {
	Flutter     string        // the flutter executable; default: flutter (flutter.bat on Windows) on each session's PATH, else in FLUTTER_ROOT
	StopGrace   time.Duration // wait after app.stop and after SIGTERM (default 5s)
	RingEntries int           // log ring bound per run, entries (default 1000)
	RingBytes   int           // log ring bound per run, bytes of text (default 100 KiB)
	// Subreaper makes the engine adopt the descendants its runs orphan
	// (Linux), reap them, and kill what is left of them at Close. For a
	// daemon: it changes the whole process, and reaps every child that
	// is not a run's leader.
	Subreaper bool
	// LoginEnv is the user's login environment and where it came from
	// (daemon/loginenv), which fills what a session's client left out of
	// the environment it passed: Start asks it for each run, so it must be
	// cheap after its first call. nil: nothing is filled.
	LoginEnv func() (vars map[string]string, source string)
	// Holders keeps each flutter run in a holder process of flyd's own
	// binary (internal/holder) that outlives flyd: a restart of flyd,
	// planned or not, keeps the run, and the next flyd takes it back
	// (Open, Resume). nil: every run ends with flyd.
	Holders *Holders
}

// Holders is where and how runs get their holders.
type Holders struct {
	Exe string // flyd's binary, which `Exe hold` makes a holder
	Dir string // the runs' directories go here, one each
	// Control names the control endpoint of run id, whose directory is
	// dir (paths.Paths.RunControl).
	Control func(id, dir string) string
}
