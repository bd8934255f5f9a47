//go:build unix && !darwin

package main

import (
	"errors"
	"os/exec"
	"path/filepath"
)

// claudeDesktopConfig is Claude Desktop's config file:
// $XDG_CONFIG_HOME/Claude/claude_desktop_config.json, or under ~/.config.
func claudeDesktopConfig(getenv func(string) string) (string, error) {
	base := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(base) {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("cannot find Claude Desktop's config: neither XDG_CONFIG_HOME nor HOME is set")
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "Claude", "claude_desktop_config.json"), nil
}

// browserCommand opens url in the user's browser.
func browserCommand(url string) *exec.Cmd { return exec.Command("xdg-open", url) }
