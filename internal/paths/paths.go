// Package paths answers where fly keeps its files: the per-user state
// directory (bbolt file, lock, token, daemon log) and the daemon's
// endpoint (a Unix socket, or a named pipe on Windows).
//
// flyd, flyctl and the shim all ask this package, so they always agree.
// It reads no environment itself: callers pass a getenv function, which
// keeps library code free of hidden inputs and lets tests inject values.
// It imports only the standard library and internal/owner. What differs
// by OS (the default directories, the endpoint and its checks) is in
// paths_darwin.go, paths_windows.go, paths_other.go, socket_unix.go,
// socket_windows.go and trust_unix.go.
package paths

import (
	"errors"
	"path/filepath"
)

// MaxSocketPath is the longest socket path, in bytes, that every supported
// OS accepts (sun_path is 104 bytes on macOS, 108 on Linux, both including
// the terminating NUL).
const MaxSocketPath = 103

// Environment variables that override the defaults.
const (
	EnvSocket    = "FLY_SOCKET"
	EnvStateDir  = "FLY_STATE_DIR"
	EnvConfigDir = "FLY_CONFIG_DIR"
)

// Paths is where one user's fly files live.
type Paths struct {
	StateDir string // holds fly.db, flyd.lock, token, flyd.log
	Socket   string // the daemon's endpoint: a Unix socket, or a named pipe on Windows
	// ConfigDir holds the user's upstreams.json: never a project's
	// directory. "" when no home is known: then there is none.
	ConfigDir string
}

// Upstreams is the user's file of shared upstream MCP servers, in the
// mcpServers shape editors use.
func (p Paths) Upstreams() string {
	if p.ConfigDir == "" {
		return ""
	}
	return filepath.Join(p.ConfigDir, "upstreams.json")
}

// StateEntries are the names (path.Match patterns) of what fly keeps in
// its state directory: uninstall removes these and nothing else. Marks
// are the ones only fly's state directory holds.
var (
	StateEntries = []string{"fly.db", "fly.db.*", "flyd.lock", "flyd.log", "token", "token.tmp", "http.addr", "seqmarks", "start.lock", "runs"}
	StateMarks   = []string{"fly.db", "flyd.lock"}
)

// Lock is the file flyd holds an exclusive flock on while it runs.
func (p Paths) Lock() string { return filepath.Join(p.StateDir, "flyd.lock") }

// DB is the bbolt database file.
func (p Paths) DB() string { return filepath.Join(p.StateDir, "fly.db") }

// Log is where a detached flyd writes its log.
func (p Paths) Log() string { return filepath.Join(p.StateDir, "flyd.log") }

// Token is the bearer token file for the loopback TCP listener.
func (p Paths) Token() string { return filepath.Join(p.StateDir, "token") }

// HTTPAddr is the file where flyd writes the address of its loopback
// TCP listener (absent when it has none).
func (p Paths) HTTPAddr() string { return filepath.Join(p.StateDir, "http.addr") }

// Runs is the directory of the runs' holders, a directory each (see
// internal/holder): beside the socket, in the runtime directory, on Unix;
// in the state directory on Windows, whose endpoint is a pipe.
func (p Paths) Runs() string { return runsDir(p) }

// RunControl is the control endpoint of the holder of run id, whose
// directory is dir: a socket in it on Unix, a pipe named after flyd's on
// Windows.
func (p Paths) RunControl(id, dir string) string { return runControl(p, id, dir) }

// Resolve computes the paths for the current user from the environment
// given by getenv (os.Getenv in production). FLY_SOCKET and FLY_STATE_DIR
// win over the platform defaults. Relative overrides are made absolute.
func Resolve(getenv func(string) string) (Paths, error) {
	var p Paths
	var err error
	if p.StateDir, err = stateDir(getenv); err != nil {
		return Paths{}, err
	}
	if p.Socket, err = socket(getenv); err != nil {
		return Paths{}, err
	}
	p.ConfigDir = configDir(getenv, p.StateDir)
	return p, nil
}

// configDir is FLY_CONFIG_DIR, or the OS's default (defaultConfigDir).
func configDir(getenv func(string) string, state string) string {
	if d := getenv(EnvConfigDir); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
	}
	return defaultConfigDir(getenv, state)
}

// stateDir is FLY_STATE_DIR, or the OS's default (defaultStateDir).
func stateDir(getenv func(string) string) (string, error) {
	if d := getenv(EnvStateDir); d != "" {
		return filepath.Abs(d)
	}
	return defaultStateDir(getenv)
}

// socket is FLY_SOCKET's endpoint, or the OS's default (defaultSocket).
func socket(getenv func(string) string) (string, error) {
	if s := getenv(EnvSocket); s != "" {
		return socketOverride(s)
	}
	return defaultSocket(getenv)
}

// ErrUntrusted is wrapped by the refusals of an endpoint that another user
// could have made: CheckSocketTrust's, and a Windows dial's of a pipe whose
// server is not this user.
var ErrUntrusted = errors.New("flyd's socket is not safe to use")

// CheckSocketPath reports whether path is an endpoint every supported OS
// accepts: on Unix, a path that fits in a sockaddr_un; on Windows, a pipe
// name. The error names the path and says what to do.
func CheckSocketPath(path string) error { return checkSocketPath(path) }

// CheckSocketTrust checks, before a client connects to socket and sends
// it anything, that nobody but this user could have made it (see the
// per-OS forms).
func CheckSocketTrust(socket string) error { return checkSocketTrust(socket) }
