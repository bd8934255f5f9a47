//go:build !darwin && !windows

package dtd

import "path/filepath"

// dartStateDir is Dart's state directory: $XDG_STATE_HOME/Dart, or
// ~/.local/state/Dart.
func dartStateDir(getenv func(string) string) string {
	state := getenv("XDG_STATE_HOME")
	if state == "" {
		state = filepath.Join(getenv("HOME"), ".local", "state")
	}
	return filepath.Join(state, "Dart")
}
