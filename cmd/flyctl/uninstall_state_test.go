package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// removeState removes what fly made and nothing else: a FLY_STATE_DIR
// set by mistake to a directory of the user's keeps the user's files.
func TestRemoveStateKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fly.db", "fly.db.corrupt-20261127", "flyd.lock", "flyd.log", "token", "http.addr", "seqmarks", "notes.txt", "project/main.dart"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := removeState(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"notes.txt", "project"}) {
		t.Errorf("removeState kept %v, want the user's notes.txt and project", kept)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 2 {
		t.Errorf("left %d entries, want the 2 that are not fly's", len(left))
	}
	// Once only fly's files are there, the directory goes too.
	os.RemoveAll(filepath.Join(dir, "project"))
	os.Remove(filepath.Join(dir, "notes.txt"))
	os.WriteFile(filepath.Join(dir, "fly.db"), nil, 0o600)
	if kept, err := removeState(dir); err != nil || len(kept) != 0 {
		t.Fatalf("removeState = %v, %v", kept, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the emptied state directory is still there: %v", err)
	}
}
