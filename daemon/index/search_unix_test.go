//go:build unix

package index

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestColdReadsAsServed: the first search reads files the way reads are
// served: a hard-linked file and a FIFO are skipped (without blocking), a
// symlink that stays inside the root is followed.
func TestColdReadsAsServed(t *testing.T) {
	x := searchTree(t, map[string]string{
		"lib/a.dart":      "NEEDLE a\n",
		"lib/inside.dart": "NEEDLE inside\n",
		"outside.txt":     "",
	})
	root := x.root
	outside := filepath.Join(t.TempDir(), "secret.dart")
	if err := os.WriteFile(outside, []byte("NEEDLE secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(root, "lib", "hard.dart")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "lib", "fifo.dart"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inside.dart", filepath.Join(root, "lib", "via_link.dart")); err != nil {
		t.Fatal(err)
	}
	// A fresh index sees them all; its cache is empty.
	y, err := openIndex(root, DefaultRules(), nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	re, _ := CompilePattern("NEEDLE", true, false)
	got := grepAll(t, y, GrepOptions{Pattern: re, Limit: 100, Budget: 16 << 10, MaxFile: 1 << 20, MaxLineLen: 300})
	want := []string{"lib/a.dart:1:NEEDLE a", "lib/inside.dart:1:NEEDLE inside", "lib/via_link.dart:1:NEEDLE inside"}
	if !slices.Equal(got, want) {
		t.Errorf("a cold search = %q, want %q (no hard link, no FIFO)", got, want)
	}
}
