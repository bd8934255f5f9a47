package paths

import (
	"errors"
	"path/filepath"
)

// defaultConfigDir is %APPDATA%\fly, which roams with the user.
func defaultConfigDir(getenv func(string) string, state string) string {
	if d := getenv("APPDATA"); filepath.IsAbs(d) {
		return filepath.Join(d, "fly")
	}
	return state
}

// defaultStateDir is %LOCALAPPDATA%\fly: logs and the database stay on
// this machine.
func defaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("LOCALAPPDATA"); filepath.IsAbs(d) {
		return filepath.Join(d, "fly"), nil
	}
	return "", errors.New("cannot find the state directory: LOCALAPPDATA is not set (set FLY_STATE_DIR)")
}
