package main

import (
	"errors"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// claudeDesktopConfig is Claude Desktop's config file:
// %APPDATA%\Claude\claude_desktop_config.json.
func claudeDesktopConfig(getenv func(string) string) (string, error) {
	base := getenv("APPDATA")
	if !filepath.IsAbs(base) {
		return "", errors.New("cannot find Claude Desktop's config: APPDATA is not set")
	}
	return filepath.Join(base, "Claude", "claude_desktop_config.json"), nil
}

// browserCommand opens url in the user's browser: rundll32 hands it to
// url.dll's FileProtocolHandler, which opens it with the handler of its
// scheme. No shell reads the command line (cmd /c start would take a & in
// the address for a command separator), and rundll32 is the one in the
// system directory, not one found on PATH.
func browserCommand(url string) *exec.Cmd {
	rundll32 := "rundll32.exe"
	if dir, err := windows.GetSystemDirectory(); err == nil {
		rundll32 = filepath.Join(dir, "rundll32.exe")
	}
	return exec.Command(rundll32, "url.dll,FileProtocolHandler", url)
}
