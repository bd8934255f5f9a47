package sysmem

import "testing"

// TestTotal: every machine fly runs on says how much memory it has, and
// it is at least what this test process uses.
func TestTotal(t *testing.T) {
	n := Total()
	if n < 64<<20 || n > 1<<50 {
		t.Fatalf("Total() = %d bytes: not a machine's memory", n)
	}
}
