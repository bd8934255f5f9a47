//go:build unix

package owner

import (
	"os"
	"testing"
)

// shareWithOthers lets every user read and write path.
func shareWithOthers(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
}
