//go:build unix

package flytest

import (
	"os/exec"
	"syscall"
)

// askToStop asks flyd to stop as a service manager does: SIGTERM.
func askToStop(cmd *exec.Cmd, _ string) error { return cmd.Process.Signal(syscall.SIGTERM) }
