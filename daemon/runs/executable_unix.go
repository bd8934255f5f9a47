//go:build unix

package runs

import (
	"os"
	"path/filepath"
)

// What an executable is on Unix: a file with an execute bit, whose
// arguments reach it as they are. (executable_windows.go is Windows'.)

// flutterFlagExample is --flutter's value in the hint of ErrNoFlutter.
const flutterFlagExample = "/path/to/flutter"

// envValue is the variable key of env: names are case-sensitive.
func envValue(env map[string]string, key string) string { return env[key] }

// flutterIn returns dir's flutter, and whether it is an executable file.
func flutterIn(dir string, _ map[string]string) (string, bool) {
	p := filepath.Join(dir, "flutter")
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// checkCommandLine: a Unix child receives its arguments one by one, as
// they are; no shell reads them.
func checkCommandLine(exe string, args []string) error { return nil }
