package paths

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/fly-dev/fly/internal/owner"
)

// On Windows flyd's endpoint is a named pipe. Pipe names are one
// machine-wide namespace, so each user's is named by their SID, and a
// FLY_SOCKET that is a path (as tests and private daemons give it) names
// a pipe of its own, derived from that path.

// pipePrefix begins every local pipe name.
const pipePrefix = `\\.\pipe\`

// maxPipeName is the longest pipe name Windows accepts.
const maxPipeName = 256

// socketOverride is FLY_SOCKET's pipe: the name itself if it is one, else
// a pipe named by a hash of the absolute path it gives.
func socketOverride(s string) (string, error) {
	if strings.HasPrefix(strings.ToLower(s), pipePrefix) {
		return s, nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.ToLower(abs)))
	return pipePrefix + "fly-" + hex.EncodeToString(sum[:12]), nil
}

// defaultSocket is the user's pipe, named by their SID.
func defaultSocket(func(string) string) (string, error) {
	u := owner.Current()
	if !u.Known() {
		return "", fmt.Errorf("cannot name flyd's pipe: this process's user is unknown (set %s)", EnvSocket)
	}
	return pipePrefix + "fly-" + u.String(), nil
}

func checkSocketPath(path string) error {
	if !strings.HasPrefix(strings.ToLower(path), pipePrefix) || len(path) > maxPipeName {
		return fmt.Errorf("flyd's endpoint %q is not a pipe name (%s… of at most %d characters); set %s to one, or to a path", path, pipePrefix, maxPipeName, EnvSocket)
	}
	return nil
}

// checkSocketTrust: a pipe has no file or directory to check before the
// dial. Its server is checked instead as it is dialled (internal/ipc),
// before anything is sent: a pipe served by another user is refused with
// ErrUntrusted there.
func checkSocketTrust(string) error { return nil }

func runsDir(p Paths) string { return filepath.Join(p.StateDir, "runs") }

func runControl(p Paths, id, _ string) string { return p.Socket + "-run-" + id }
