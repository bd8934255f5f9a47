//go:build linux || windows

package runs

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readPID waits for a pid file a test's child writes.
func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang detector
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond) // polling the file the child writes
	}
}
