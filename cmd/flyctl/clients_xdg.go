//go:build unix && !darwin

package main

import (
	"errors"
	"path/filepath"
)

// vscodeUserDir is VS Code's user directory, which holds the user
// profile's mcp.json: $XDG_CONFIG_HOME/Code/User, or under ~/.config.
func vscodeUserDir(getenv func(string) string) (string, error) {
	base := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(base) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return "", errors.New("cannot find VS Code's settings: neither XDG_CONFIG_HOME nor HOME is set")
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "Code", "User"), nil
}
