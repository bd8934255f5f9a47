package main

import (
	"errors"
	"os/exec"
	"path/filepath"
)

// claudeDesktopConfig is Claude Desktop's config file:
// ~/Library/Application Support/Claude/claude_desktop_config.json.
func claudeDesktopConfig(getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find Claude Desktop's config: HOME is not set")
	}
	return filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json"), nil
}

// browserCommand opens url in the user's browser.
func browserCommand(url string) *exec.Cmd { return exec.Command("open", url) }
