//go:build unix

package paths

import (
	"fmt"
	"path/filepath"
)

// socketOverride is FLY_SOCKET's path, made absolute.
func socketOverride(s string) (string, error) { return filepath.Abs(s) }

// defaultSocket is flyd.sock in the OS's runtime directory.
func defaultSocket(getenv func(string) string) (string, error) {
	dir, err := runtimeDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "flyd.sock"), nil
}

func checkSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("socket path %q is %d bytes, over the %d-byte limit of Unix sockets; set %s to a shorter path",
			path, len(path), MaxSocketPath, EnvSocket)
	}
	return nil
}

func runsDir(p Paths) string { return filepath.Join(filepath.Dir(p.Socket), "runs") }

func runControl(_ Paths, _, dir string) string { return filepath.Join(dir, "control") }
