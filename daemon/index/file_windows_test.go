package index

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOpenDirJunction: a junction (which any user may make, unlike a
// symlink) to a directory outside the root is not read as a directory,
// nor is it walked.
func TestOpenDirJunction(t *testing.T) {
	root, outside := idxTempDir(t), idxTempDir(t)
	idxWrite(t, root, "lib/a.dart", "a")
	idxWrite(t, outside, "secret.dart", "s")
	link := filepath.Join(root, "lib", "out")
	out, err := exec.Command("cmd", "/c", "mklink", "/J", link, outside).CombinedOutput()
	if _, lerr := os.Lstat(link); err != nil || lerr != nil {
		t.Skipf("cannot make a junction here: %v, %v: %s", err, lerr, out)
	}
	if f, err := openDir(link); err == nil {
		f.Close()
		t.Errorf("openDir(a junction) succeeded")
	}
	x, err := New(root, DefaultRules(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idxRelease(t, x)
	if got := idxPaths(x.Files()); len(got) != 1 || got[0] != "lib/a.dart" {
		t.Errorf("Files() = %q, want lib/a.dart alone", got)
	}
}
