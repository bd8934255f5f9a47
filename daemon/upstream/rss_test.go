package upstream

import (
	"os"
	"testing"
)

// rss reads a live process's resident memory on every system: flyd's
// status shows each upstream's.
func TestRSS(t *testing.T) {
	n, err := rss(os.Getpid())
	if err != nil || n < 1<<20 || n > 64<<30 {
		t.Errorf("rss(this test) = %d, %v; want a size between 1 MiB and 64 GiB", n, err)
	}
}
