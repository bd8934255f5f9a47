package owner

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fly-dev/fly/internal/wine"
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
	wine.SkipUnder(t, "Wine keeps no access list of its own on a file: it makes one up from the Unix mode")
	shareWithOthers(t, path)
	fi, _ = os.Lstat(path)
	if w, err := OthersCanWrite(path, fi); err != nil || !w {
		t.Fatalf("OthersCanWrite(shared) = %v, %v", w, err)
	}
	if ok, err := Secret(path, fi); err != nil || ok {
		t.Fatalf("Secret(shared) = %v, %v", ok, err)
	}
}

// Restrict makes a file and a directory secret that were not, and what
// is made in the directory afterwards is secret too.
func TestRestrict(t *testing.T) {
	wine.SkipUnder(t, "Wine keeps no access list of its own on a file: it makes one up from the Unix mode")
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	shareWithOthers(t, dir)
	shareWithOthers(t, path)
	for _, p := range []string{dir, path} {
		if err := Restrict(p); err != nil {
			t.Fatalf("Restrict(%s): %v", p, err)
		}
		fi, _ := os.Lstat(p)
		if ok, err := Secret(p, fi); err != nil || !ok {
			t.Errorf("Secret(%s) after Restrict = %v, %v; want true", p, ok, err)
		}
	}
	later := filepath.Join(dir, "later")
	if err := os.WriteFile(later, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(later)
	if ok, err := Secret(later, fi); err != nil || !ok {
		t.Errorf("Secret(a file made in a restricted directory) = %v, %v; want true", ok, err)
	}
}

// This process runs as the current user; a process that has ended runs
// as no one.
func TestRuns(t *testing.T) {
	if !Current().Runs(os.Getpid()) {
		t.Errorf("Current().Runs(this process) = false")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Current().Runs(cmd.Process.Pid) {
		t.Errorf("Current().Runs(an ended process %d) = true", cmd.Process.Pid)
	}
}
