// Package peerhandle names a client process for flyd's sessions: the same
// handle for every session of that process (told from any other by its
// start time), across restarts of flyd, so that a client whose shim
// reconnects to a new flyd keeps its claims and what it was told of its
// runs (a run that outlives flyd keeps both by handle). A handle is a
// keyed hash, not the pid: nothing about the process can be read from
// it, nor can a handle be made for another.
package peerhandle

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/fly-dev/fly/internal/proc"
)

// File is the key's file name in flyd's state directory.
const File = "session.key"

// Key makes handles. The zero Key (nil) makes none.
type Key []byte

// Load reads the key at path, making one (random, the user's alone) if
// there is none.
func Load(path string) (Key, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) == 32 {
		return b, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, fmt.Errorf("write the session key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("write the session key: %w", err)
	}
	return key, nil
}

// Of is the handle of process pid; "" when the peer is unknown (pid 0:
// HTTP, an in-process client) or k is nil.
func (k Key) Of(pid int) string {
	if k == nil || pid <= 0 {
		return ""
	}
	start, err := proc.StartTime(pid)
	if err != nil || start == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, k)
	fmt.Fprintf(mac, "%d:%d", pid, start)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}
