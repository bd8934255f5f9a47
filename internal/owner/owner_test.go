package owner

import (
	"os"
	"path/filepath"
	"testing"
)

// A file this process made is its user's, and a mode that lets others
// write is seen.
func TestOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Of(path, fi)
	if err != nil || !o.Me || o.Name != Me() {
		t.Fatalf("Of(a file of ours) = %+v, %v; want this user, %s", o, err, Me())
	}
	if w, err := OthersCanWrite(path, fi); err != nil || w {
		t.Fatalf("OthersCanWrite(0600) = %v, %v", w, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Lstat(path)
	if w, err := OthersCanWrite(path, fi); err != nil || !w {
		t.Fatalf("OthersCanWrite(0666) = %v, %v", w, err)
	}
}
