package index

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every watcher and walk goroutine of the tests'
// indexes is gone once they are released.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
