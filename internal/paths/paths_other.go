//go:build !darwin && !windows

package paths

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// defaultConfigDir is $XDG_CONFIG_HOME/fly, or ~/.config/fly.
func defaultConfigDir(getenv func(string) string, _ string) string {
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".config", "fly")
	}
	return ""
}

// defaultStateDir is $XDG_STATE_HOME/fly, or ~/.local/state/fly.
func defaultStateDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find the state directory: neither XDG_STATE_HOME nor HOME is set (set FLY_STATE_DIR)")
	}
	return filepath.Join(home, ".local", "state", "fly"), nil
}

// runtimeDir is the socket's directory. Editors, login shells and service
// managers hand their children different environments, and every one of
// them must find the same socket: so when XDG_RUNTIME_DIR is unset, the
// directory systemd would have named is used if it exists, and the
// fallback is a fixed /tmp path rather than $TMPDIR.
func runtimeDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "fly"), nil
	}
	uid := strconv.Itoa(os.Getuid())
	if fi, err := os.Stat(filepath.Join("/run/user", uid)); err == nil && fi.IsDir() {
		return filepath.Join("/run/user", uid, "fly"), nil
	}
	return filepath.Join("/tmp", "fly-"+uid), nil
}
