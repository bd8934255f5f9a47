package e2e

import (
	"os/exec"
	"testing"
)

// asNobody skips: running a process as another user is not supported on
// Windows yet.
func asNobody(t *testing.T) *exec.Cmd {
	t.Skip("running a helper as another user is not supported on Windows yet")
	return nil
}
