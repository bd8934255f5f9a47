//go:build linux || windows

package runs

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
)

// readPID waits for a pid file a test's child writes.
func readPID(t *testing.T, path string) int {
	t.Helper()
	pid := 0
	flytest.Eventually(t, "a pid in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil
	})
	return pid
}
