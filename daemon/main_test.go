package daemon

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests here are of the daemon's own code; flyd end to end is tested
// in daemon/e2e.
func TestMain(m *testing.M) {
	// Every goroutine of every Server, session and index the tests
	// started is gone once they have stopped.
	goleak.VerifyTestMain(m)
}
