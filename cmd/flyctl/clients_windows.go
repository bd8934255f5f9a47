package main

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
)

// programNames are the file names Windows runs for the program name: name
// with each of PATHEXT's extensions (claude.cmd, code.cmd, flutter.bat,
// flyctl.exe), or name itself when it has one of them.
func programNames(name string, getenv func(string) string) []string {
	exts := pathExts(getenv("PATHEXT"))
	for _, e := range exts {
		if strings.EqualFold(filepath.Ext(name), e) {
			return []string{name}
		}
	}
	out := make([]string, len(exts))
	for i, e := range exts {
		out[i] = name + e
	}
	return out
}

// batchUnsafe are the characters cmd.exe reads as its own in a command
// line that Go made for a batch file: quoting cannot protect %, nor ! under
// delayed expansion, and a " ends Go's quotes for cmd.exe.
const batchUnsafe = "\"%!&|<>^\r\n"

// cliRunnable reports whether the program at path can be run with args as
// they are: a batch file (npm's claude.cmd, VS Code's code.cmd), which
// Windows runs through cmd.exe, cannot be given an argument holding one
// of batchUnsafe (code --add-mcp's JSON always does); the caller then
// edits the file instead.
func cliRunnable(path string, args []string) bool {
	ext := strings.ToLower(filepath.Ext(strings.TrimRight(path, ". ")))
	if ext != ".bat" && ext != ".cmd" {
		return true
	}
	if strings.ContainsAny(path, batchUnsafe) {
		return false
	}
	for _, a := range args {
		if strings.ContainsAny(a, batchUnsafe) {
			return false
		}
	}
	return true
}

// killHint is the command that stops the process pid: Windows has no
// request to stop that a process without a window could answer, so /F.
func killHint(pid int) string { return "taskkill /PID " + strconv.Itoa(pid) + " /F" }

// vscodeUserDir is VS Code's user directory, which holds the user
// profile's mcp.json: %APPDATA%\Code\User.
func vscodeUserDir(getenv func(string) string) (string, error) {
	base := getenv("APPDATA")
	if !filepath.IsAbs(base) {
		return "", errors.New("cannot find VS Code's settings: APPDATA is not set")
	}
	return filepath.Join(base, "Code", "User"), nil
}
