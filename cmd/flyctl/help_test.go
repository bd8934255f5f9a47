package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// helpEnv is a fixed environment, so that the paths a help page names
// are the same on every machine.
func helpEnv(k string) string {
	return map[string]string{
		"HOME":           "/home/dev",
		"FLY_SOCKET":     "/run/user/1000/fly/flyd.sock",
		"FLY_STATE_DIR":  "/home/dev/.local/state/fly",
		"FLY_CONFIG_DIR": "/home/dev/.config/fly",
	}[k]
}

// helpPages are the command lines that print a help page.
var helpPages = [][]string{
	{"--help"},
	{"mcp", "--help"},
	{"status", "--help"},
	{"runs", "--help"},
	{"stop", "--help"},
	{"logs", "--help"},
	{"logs", "tail", "--help"},
	{"errors", "--help"},
	{"apps", "--help"},
	{"screenshot", "--help"},
	{"grep", "--help"},
	{"upstream", "--help"},
	{"upstream", "add", "--help"},
	{"dashboard", "--help"},
	{"token", "--help"},
	{"socket", "--help"},
	{"config", "--help"},
	{"config", "mcp", "--help"},
	{"service", "--help"},
	{"service", "install", "--help"},
	{"service", "uninstall", "--help"},
	{"service", "start", "--help"},
	{"service", "stop", "--help"},
	{"service", "restart", "--help"},
	{"service", "status", "--help"},
}

// TestHelpPages keeps every help page in testdata/help: a change to one
// shows in review as a change to its golden file (go test -update
// rewrites them).
func TestHelpPages(t *testing.T) {
	for _, args := range helpPages {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, helpEnv, strings.NewReader(""), &stdout, &stderr)
		if code := exitCode(err, &stderr); code != 0 {
			t.Errorf("flyctl %q exits %d, want 0\n%s", args, code, &stderr)
			continue
		}
		name := strings.Join(args[:len(args)-1], "_")
		if name == "" {
			name = "flyctl"
		}
		checkGolden(t, "help/"+name+".golden", stdout.String()+stderr.String())
	}
}
