//go:build unix

package flytest

import (
	"io/fs"
	"os"
	"testing"
)

// LetOthersRead lets every user of the machine read path, as a file left
// world-readable by mistake is: on Unix by its mode (go+r).
func LetOthersRead(t testing.TB, path string) { t.Helper(); addMode(t, path, 0o044) }

// LetOthersWrite lets every user of the machine read and write path (for
// a directory: create, remove and replace its entries): on Unix by its
// mode (go+rw).
func LetOthersWrite(t testing.TB, path string) { t.Helper(); addMode(t, path, 0o066) }

func addMode(t testing.TB, path string, bits fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, fi.Mode().Perm()|bits); err != nil {
		t.Fatal(err)
	}
}
