// Package paths answers where fly keeps its files: the per-user state
// directory (bbolt file, lock, token, daemon log) and the Unix socket.
//
// flyd, flyctl and the shim all ask this package, so they always agree.
// It reads no environment itself: callers pass a getenv function, which
// keeps library code free of hidden inputs and lets tests inject values.
// It imports only the standard library.
package paths

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	Socket   string // the daemon's Unix socket
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

// configDir is $XDG_CONFIG_HOME/fly (~/.config/fly) on Linux and the
// state directory on macOS, where Application Support holds both.
func configDir(getenv func(string) string, state string) string {
	if d := getenv(EnvConfigDir); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
	}
	if runtime.GOOS == "darwin" {
		return state
	}
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".config", "fly")
	}
	return ""
}

func stateDir(getenv func(string) string) (string, error) {
	if d := getenv(EnvStateDir); d != "" {
		return filepath.Abs(d)
	}
	home := getenv("HOME")
	if runtime.GOOS == "darwin" {
		if home == "" {
			return "", errors.New("cannot find the state directory: HOME is not set (set FLY_STATE_DIR)")
		}
		return filepath.Join(home, "Library", "Application Support", "fly"), nil
	}
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly"), nil
	}
	if home == "" {
		return "", errors.New("cannot find the state directory: neither XDG_STATE_HOME nor HOME is set (set FLY_STATE_DIR)")
	}
	return filepath.Join(home, ".local", "state", "fly"), nil
}

func socket(getenv func(string) string) (string, error) {
	if s := getenv(EnvSocket); s != "" {
		return filepath.Abs(s)
	}
	return filepath.Join(runtimeDir(getenv), "flyd.sock"), nil
}

// runtimeDir is the socket's directory. Editors, login shells and service
// managers hand their children different environments, and every one of
// them must find the same socket: so when XDG_RUNTIME_DIR is unset, the
// directory systemd would have named is used if it exists, and the
// fallback is a fixed /tmp path rather than $TMPDIR.
func runtimeDir(getenv func(string) string) string {
	uid := strconv.Itoa(os.Getuid())
	if x := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly")
	}
	if runtime.GOOS == "linux" {
		if fi, err := os.Stat(filepath.Join("/run/user", uid)); err == nil && fi.IsDir() {
			return filepath.Join("/run/user", uid, "fly")
		}
	}
	return filepath.Join("/tmp", "fly-"+uid)
}

// CheckSocketPath reports whether path fits in a sockaddr_un on every
// supported OS. The error names the path and says how to shorten it.
func CheckSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("socket path %q is %d bytes, over the %d-byte limit of Unix sockets; set %s to a shorter path",
			path, len(path), MaxSocketPath, EnvSocket)
	}
	return nil
}
