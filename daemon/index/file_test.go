package index

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestLinkCount: a file's hard links are counted, from its open handle,
// and a hard-linked file is left out of searches and of StatFiles, as
// reads refuse it.
func TestLinkCount(t *testing.T) {
	x := searchTree(t, map[string]string{
		"lib/a.dart":    "NEEDLE a\n",
		"lib/hard.dart": "NEEDLE hard\n",
	})
	count := func(p string) uint64 {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		n, err := LinkCount(f, fi)
		if err != nil {
			t.Fatalf("LinkCount(%s) = %v", p, err)
		}
		return n
	}
	hard := filepath.Join(x.root, "lib", "hard.dart")
	if n := count(hard); n != 1 {
		t.Errorf("LinkCount of a new file = %d, want 1", n)
	}
	if err := os.Link(hard, filepath.Join(t.TempDir(), "other.dart")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if n := count(hard); n != 2 {
		t.Errorf("LinkCount of a file with a second name = %d, want 2", n)
	}
	re, _ := CompilePattern("NEEDLE", true, false)
	got := grepAll(t, x, GrepOptions{Pattern: re, Limit: 100, Budget: 16 << 10, MaxFile: 1 << 20, MaxLineLen: 300})
	if want := []string{"lib/a.dart:1:NEEDLE a"}; !slices.Equal(got, want) {
		t.Errorf("a search = %q, want %q (not the hard-linked file)", got, want)
	}
	if got := StatFiles(x.Root(), []File{{Path: "lib/a.dart"}, {Path: "lib/hard.dart"}}); len(got) != 1 || got[0].Path != "lib/a.dart" {
		t.Errorf("StatFiles = %+v, want lib/a.dart alone", got)
	}
}

// TestOpenDirNoFollow: a directory is read; a link to one is refused.
func TestOpenDirNoFollow(t *testing.T) {
	dir := idxTempDir(t)
	idxWrite(t, dir, "real/a.dart", "a")
	f, err := openDir(filepath.Join(dir, "real"))
	if err != nil {
		t.Fatalf("openDir(a directory) = %v", err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil || len(ents) != 1 || ents[0].Name() != "a.dart" {
		t.Errorf("ReadDir = %v, %v; want a.dart", ents, err)
	}
	if f, err := openDir(filepath.Join(dir, "real", "a.dart")); err == nil {
		f.Close()
		t.Errorf("openDir(a file) succeeded")
	}
	if !idxSymlinks(t) {
		return
	}
	idxSymlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "link"))
	if f, err := openDir(filepath.Join(dir, "link")); err == nil {
		f.Close()
		t.Errorf("openDir(a symlink to a directory) succeeded")
	}
}

// TestIDOf: a directory keeps its identity; another has another.
func TestIDOf(t *testing.T) {
	a, b := idxTempDir(t), idxTempDir(t)
	id := idOf(a)
	if id == (fileID{}) || idOf(a) != id {
		t.Errorf("idOf(%s) = %v, then %v", a, id, idOf(a))
	}
	if idOf(b) == id {
		t.Errorf("idOf of two directories = %v", id)
	}
	if got := idOf(filepath.Join(a, "missing")); got != (fileID{}) {
		t.Errorf("idOf(missing) = %v, want zero", got)
	}
}

// TestChangeTime: a regular file's change time moves when another file is
// renamed onto its name, though the new file's times are set back; a
// directory has none.
func TestChangeTime(t *testing.T) {
	dir := idxTempDir(t)
	idxWrite(t, dir, "a.dart", "a")
	idxWrite(t, dir, "b.dart", "b")
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	b := filepath.Join(dir, "b.dart")
	if err := os.Chtimes(b, old, old); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-ctimeSlack)
	if err := os.Rename(b, filepath.Join(dir, "a.dart")); err != nil {
		t.Fatal(err)
	}
	ct, ok := changeTime(filepath.Join(dir, "a.dart"))
	if !ok || ct.Before(before) {
		t.Errorf("changeTime after a rename onto the name = %v, %v; want at or after %v", ct, ok, before)
	}
	if _, ok := changeTime(dir); ok {
		t.Errorf("changeTime(a directory) is ok")
	}
	if _, ok := changeTime(filepath.Join(dir, "missing")); ok {
		t.Errorf("changeTime(missing) is ok")
	}
}
