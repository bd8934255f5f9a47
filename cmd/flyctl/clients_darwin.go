package main

import (
	"errors"
	"path/filepath"
)

// vscodeUserDir is VS Code's user directory, which holds the user
// profile's mcp.json: ~/Library/Application Support/Code/User.
func vscodeUserDir(getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("cannot find VS Code's settings: HOME is not set")
	}
	return filepath.Join(home, "Library", "Application Support", "Code", "User"), nil
}
