package store

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewRunID(t *testing.T) {
	prev := ""
	for range 10_000 {
		id := NewRunID()
		if len(id) != 18 || strings.Trim(id, "0123456789abcdefghjkmnpqrstvwxyz") != "" {
			t.Fatalf("NewRunID() = %q, want 18 lower-case base32 characters", id)
		}
		if id <= prev {
			t.Fatalf("NewRunID() = %q after %q, want ids that sort in creation order", id, prev)
		}
		prev = id
	}
}

func TestPrune(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "fly.db")
	db := mustOpenAt(t, path, Options{KeepRuns: 3, MaxAge: 24 * time.Hour})
	startWriter(t, db)

	type run struct {
		name  string
		state State
		ended time.Duration // before now; 0: not ended
		kept  bool
	}
	// Oldest first, as ids are made.
	all := []run{
		{"live and old", StateRunning, 0, true},
		{"finished 4th newest", StateExited, time.Hour, false},
		{"starting", StateStarting, 0, true},
		{"finished 3rd newest", StateFailed, time.Hour, true},
		{"finished but too old", StateStopped, 25 * time.Hour, false},
		{"finished 2nd newest", StateInterrupted, time.Hour, true},
		{"finished newest", StateExited, time.Minute, true},
	}
	ids := make(map[string]string)
	for _, r := range all {
		id := NewRunID()
		ids[r.name] = id
		rec := Record{ID: id, State: r.state, StartedAt: now.Add(-30 * 24 * time.Hour)}
		if r.ended > 0 {
			rec.EndedAt = now.Add(-r.ended)
		}
		mustPutRun(t, db, rec)
		db.Append(id, Entry{Text: r.name})
	}
	db.Append("orphan", Entry{Text: "a log with no run record"})
	mustFlush(t, db)

	n, err := db.Prune(now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Prune() = %d, want 2", n)
	}
	for _, r := range all {
		_, rerr := db.GetRun(ids[r.name])
		_, lerr := db.Logs(ids[r.name], 0, 0)
		if r.kept && (rerr != nil || lerr != nil) {
			t.Errorf("%s: GetRun = %v, Logs = %v, want it kept", r.name, rerr, lerr)
		}
		if !r.kept && (!errors.Is(rerr, ErrNotFound) || !errors.Is(lerr, ErrNotFound)) {
			t.Errorf("%s: GetRun = %v, Logs = %v, want it deleted with its log", r.name, rerr, lerr)
		}
	}
	if _, err := db.Logs("orphan", 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(orphan) = %v, want its log deleted", err)
	}

	runs, err := db.Runs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.ID)
	}
	var want []string
	for _, r := range slices.Backward(all) {
		if r.kept {
			want = append(want, ids[r.name])
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Runs() after Prune = %v, want %v (newest first)", got, want)
	}

	if n, err := db.Prune(now); err != nil || n != 0 {
		t.Errorf("second Prune() = %d, %v, want 0", n, err)
	}
}

func TestPruneDisabled(t *testing.T) {
	db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{KeepRuns: -1, MaxAge: -1})
	for range 5 {
		mustPutRun(t, db, Record{ID: NewRunID(), State: StateExited, EndedAt: time.Unix(0, 0)})
	}
	if n, err := db.Prune(time.Now()); err != nil || n != 0 {
		t.Errorf("Prune() with retention off = %d, %v, want 0", n, err)
	}
}
