package paths

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// defaultConfigDir is the state directory: Application Support holds both.
func defaultConfigDir(_ func(string) string, state string) string { return state }

// defaultStateDir is ~/Library/Application Support/fly.
func defaultStateDir(getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find the state directory: HOME is not set (set FLY_STATE_DIR)")
	}
	return filepath.Join(home, "Library", "Application Support", "fly"), nil
}

// runtimeDir is the socket's directory: $XDG_RUNTIME_DIR/fly if set, else
// a fixed /tmp path (not $TMPDIR, which launchd and a login shell may
// name differently), so that every client finds the same socket.
func runtimeDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly"), nil
	}
	return filepath.Join("/tmp", "fly-"+strconv.Itoa(os.Getuid())), nil
}
