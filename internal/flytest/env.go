package flytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/lockfile"
	"github.com/fly-dev/fly/internal/paths"
)

// Env is one isolated fly installation: its own socket and state dir.
type Env struct {
	Dir   string      // the temp dir holding everything, removed at Cleanup
	Paths paths.Paths // under Dir
	Vars  []string    // os.Environ with FLY_SOCKET and FLY_STATE_DIR set to Paths
	// MaxFiles, if set, is the descriptor limit (soft and hard) flyd is
	// started with, as a service manager may set a low one.
	MaxFiles int
}

// NewEnv returns an isolated environment in a short temp dir (socket
// paths must stay under paths.MaxSocketPath, which t.TempDir can exceed).
func NewEnv(t testing.TB) *Env {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	// As flyd, flyctl and the shim resolve them: on Windows the socket
	// path names a pipe of its own.
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: filepath.Join(dir, "run", "flyd.sock"),
			paths.EnvStateDir: filepath.Join(dir, "state"), paths.EnvConfigDir: filepath.Join(dir, "config")}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A flyd that a shim started on its own (say, reconnecting as the
		// test stopped the one it knew) is nobody else's to stop: it
		// would outlive the test, its state dir gone.
		if pid := stopLeftBehind(p.Lock()); pid != 0 {
			t.Logf("stopped a flyd the test left running (pid %d)", pid)
		}
		for _, pid := range flydsOf(p.StateDir) { // one still starting
			t.Logf("killed a flyd the test left starting (pid %d)", pid)
			_ = Signal(pid, syscall.SIGKILL)
		}
		// A run whose flyd the test killed goes on with its holder: end it.
		if n := KillHolders(p.Runs()); n > 0 {
			t.Logf("killed %d runs the test left with their holders", n)
		}
		os.RemoveAll(dir)
	})
	// DART_DATA_HOME keeps flyd's app discovery (and the fake's DTD
	// files) inside the test: DTDDir(e) is where the files go.
	return &Env{Dir: dir, Paths: p, Vars: append(os.Environ(),
		paths.EnvSocket+"="+p.Socket, paths.EnvStateDir+"="+p.StateDir, paths.EnvConfigDir+"="+p.ConfigDir,
		"DART_DATA_HOME="+filepath.Join(dir, "dart"))}
}

// stopLeftBehind stops the flyd that holds the lock file lock, if one
// does, and returns its pid: SIGTERM, then SIGKILL if it still holds the
// lock after 10 s.
func stopLeftBehind(lock string) int {
	if _, err := os.Stat(lock); err != nil {
		return 0
	}
	l, err := lockfile.TryLock(lock)
	if err == nil {
		l.Unlock()
		return 0 // nobody holds it
	}
	if !errors.Is(err, lockfile.ErrLocked) {
		return 0
	}
	defer l.Unlock()
	b := make([]byte, 32)
	n, _ := l.File().ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	_ = Signal(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if free(lock) {
			return pid
		}
	}
	_ = Signal(pid, syscall.SIGKILL)
	return pid
}

// free reports whether nobody holds the lock file lock.
func free(lock string) bool {
	l, err := lockfile.TryLock(lock)
	if l != nil {
		l.Unlock()
	}
	return err == nil
}

// Signal sends sig to the process pid.
func Signal(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// DTDDir is the directory of DTD files flyd of e watches.
func (e *Env) DTDDir() string { return filepath.Join(e.Dir, "dart", "dtd") }

// Getenv is the environment of an in-process flyctl: only fly's paths.
func (e *Env) Getenv(k string) string {
	switch k {
	case paths.EnvSocket:
		return e.Paths.Socket
	case paths.EnvStateDir:
		return e.Paths.StateDir
	case paths.EnvConfigDir:
		return e.Paths.ConfigDir
	}
	return ""
}

// WithFakeFlutter puts the fake flutter first on e's PATH, steered by
// vars ("FAKE_FLUTTER_X=v"). Start flyd after calling it: the fake reads
// its steering from flyd's environment, and the shim hands flyd the PATH.
// The fake is the test binary itself, run with FLY_TEST_HELPER=flutter,
// so the caller's TestMain must act as internal/fakeflutter then. It
// returns the fake's path, for a test that runs it as an IDE would.
func (e *Env) WithFakeFlutter(t testing.TB, vars ...string) (flutter string) {
	t.Helper()
	dir := t.TempDir()
	flutter, err := fakeflutter.Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.Vars = append(e.Vars, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "FLY_TEST_HELPER=flutter")
	e.Vars = append(e.Vars, vars...)
	return flutter
}

// HTTPClient talks HTTP to flyd over e's socket.
func (e *Env) HTTPClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ipc.Dial(ctx, e.Paths.Socket)
		},
	}}
}
