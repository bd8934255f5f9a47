package e2e

import (
	"os/exec"
	"testing"
)

// asNobody skips on Windows: starting a process as another user needs a
// second account's password (CreateProcessWithLogonW), which no test
// machine of ours has. daemon/endpoint's TestPeerOfOtherUserRefused
// checks the refusal itself on every OS, by making flyd's user someone
// else.
func asNobody(t *testing.T) *exec.Cmd {
	t.Skip("starting a process as another Windows user needs that account's password; TestPeerOfOtherUserRefused (daemon/endpoint) covers the refusal")
	return nil
}
