package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fillStore writes a store with runs and logs of several pages and
// returns its path. With clean false the file is left as a flyd killed
// with -9 leaves it: written and synced, but never closed.
func fillStore(t *testing.T, clean bool) (path string, ids []string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "fly.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := NewRunID()
		ids = append(ids, id)
		mustPutRun(t, db, Record{ID: id, State: StateExited})
		for j := range 400 {
			if err := db.Append(id, Entry{Text: fmt.Sprintf("run %d line %d %s", i, j, strings.Repeat("x", 60))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustFlush(t, db)
	if clean {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	} else if err := db.bolt.Close(); err != nil { // the dirty mark stays
		t.Fatal(err)
	}
	return path, ids
}

// logBuffer is a goroutine-safe log destination.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOpenDamaged damages the file the ways a full disk, a half copy, a
// stray write or a wrong file do: Open never crashes, moves the file
// aside, starts a new one, and says so.
func TestOpenDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		clean  bool
		damage func(t *testing.T, path string)
	}{
		{"truncated", true, func(t *testing.T, path string) {
			if err := os.Truncate(path, 10000); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage", true, func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 2000), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"pages overwritten after a crash", false, func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ps := os.Getpagesize()
			for p := 4; (p+1)*ps <= len(b); p += 2 { // every other page past the metas and freelist
				copy(b[p*ps:], bytes.Repeat([]byte{0xa5}, ps))
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := fillStore(t, tc.clean)
			tc.damage(t, path)
			var logs logBuffer
			db, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("Open(damaged) = %v, want a fresh store", err)
			}
			defer db.Close()
			if db.Recovery() == "" || !strings.Contains(db.Recovery(), "moved") {
				t.Errorf("Recovery() = %q, want what happened", db.Recovery())
			}
			aside, _ := filepath.Glob(path + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("moved-aside files: %v, want one", aside)
			}
			if !strings.Contains(logs.String(), "damaged") || !strings.Contains(logs.String(), aside[0]) {
				t.Errorf("log does not say the file was damaged and where it went:\n%s", logs.String())
			}
			runs, err := db.Runs()
			if err != nil || len(runs) != 0 {
				t.Errorf("fresh store Runs() = %v, %v", runs, err)
			}
			id := NewRunID()
			if err := db.Append(id, Entry{Text: "works"}); err != nil {
				t.Fatal(err)
			}
			mustFlush(t, db)
			if es, _ := db.Logs(id, 0, 0); len(es) != 1 {
				t.Errorf("fresh store holds %d entries, want 1", len(es))
			}
		})
	}
}

// TestOpenAfterCrashSound reopens a file that was not closed but is
// sound: it is checked, kept, and all its data is there.
func TestOpenAfterCrashSound(t *testing.T) {
	path, ids := fillStore(t, false)
	var logs logBuffer
	db, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Recovery() != "" {
		t.Errorf("Recovery() = %q for a sound file", db.Recovery())
	}
	if !strings.Contains(logs.String(), "checked every page") {
		t.Errorf("log does not mention the check after an unclean shutdown:\n%s", logs.String())
	}
	for _, id := range ids {
		if st, err := db.LogStats(id); err != nil || st.Entries != 400 {
			t.Errorf("LogStats(%s) = %+v, %v, want 400 entries", id, st, err)
		}
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 0 {
		t.Errorf("a sound file was moved aside: %v", aside)
	}
}

func TestCheckFileEmptyOrMissing(t *testing.T) {
	dir := t.TempDir()
	if err := checkFile(filepath.Join(dir, "missing.db")); err != nil {
		t.Errorf("checkFile(missing) = %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if err := checkFile(empty); err != nil {
		t.Errorf("checkFile(empty) = %v", err)
	}
	short := filepath.Join(dir, "short.db")
	os.WriteFile(short, []byte("x"), 0o600)
	if err := checkFile(short); !errors.Is(err, ErrCorrupt) {
		t.Errorf("checkFile(1 byte) = %v, want ErrCorrupt", err)
	}
}
