package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/wine"
)

// mustOpen opens a store in a new temporary directory with default
// options, and closes it at the end of the test.
func mustOpen(t *testing.T) *DB {
	t.Helper()
	return mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{})
}

// mustOpenAt opens the store at path, and closes it at the end of the
// test. Closing twice is harmless, so tests may Close it early.
func mustOpenAt(t *testing.T, path string, opts Options) *DB {
	t.Helper()
	db, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return db
}

// startWriter runs db.Run until the end of the test, and waits for it.
func startWriter(t *testing.T, db *DB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Run(ctx) }() // owned by this test's cleanup
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) { // the test may Close first
			t.Errorf("Run() = %v", err)
		}
	})
}

func mustFlush(t *testing.T, db *DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.Flush(ctx); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
}

func mustPutRun(t *testing.T, db *DB, r Record) {
	t.Helper()
	if err := db.PutRun(r); err != nil {
		t.Fatalf("PutRun(%s) = %v", r.ID, err)
	}
}

// Environment of the helper process of TestOpenLocked.
const (
	envHelper     = "FLY_STORE_TEST_HELPER"
	envHelperPath = "FLY_STORE_TEST_PATH"
)

// lockResult is what the helper process reports on stdout.
type lockResult struct {
	Elapsed time.Duration
	Err     string
}

const helperLockTimeout = 300 * time.Millisecond

// TestHelperOpen is not a test: TestOpenLocked runs the test binary again
// with envHelper set, so that the second Open comes from another process.
func TestHelperOpen(t *testing.T) {
	if os.Getenv(envHelper) != "open" {
		t.Skip("helper process for TestOpenLocked")
	}
	start := time.Now()
	db, err := Open(os.Getenv(envHelperPath), Options{LockTimeout: helperLockTimeout})
	res := lockResult{Elapsed: time.Since(start)}
	if err != nil {
		res.Err = err.Error()
	} else {
		db.Close()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	mustOpenAt(t, path, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperOpen$")
	cmd.Env = append(os.Environ(), envHelper+"=open", envHelperPath+"="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	var res lockResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	t.Logf("second Open from another process: %v after %v", res.Err, res.Elapsed)
	if !strings.Contains(res.Err, path) || !strings.Contains(res.Err, "in use by another flyd") {
		t.Errorf("second Open error = %q, want one naming %s and saying it is in use by another flyd", res.Err, path)
	}
	// That it gave up at all (its lock timeout, not the context's 30 s)
	// is the check: how fast is the machine's business, not the test's.
}

// TestOpenFilePrivate: in a state directory made the user's alone, as
// flyd makes it, the store's file is the user's alone too: on Unix by its
// own mode (0600), on Windows by the access list it inherits from the
// directory (its mode means nothing there).
func TestOpenFilePrivate(t *testing.T) {
	wine.SkipUnder(t, "it keeps no access lists on files")
	dir := filepath.Join(t.TempDir(), "state")
	if err := owner.MkdirPrivate(dir); err != nil {
		t.Fatal(err)
	}
	db := mustOpenAt(t, filepath.Join(dir, "fly.db"), Options{})
	assertPrivate(t, db.Path())
}

// assertPrivate checks that the file at path is the user's alone.
func assertPrivate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := owner.Secret(path, fi); err != nil || !ok {
		t.Errorf("owner.Secret(%s) = %v, %v (mode %v); want the file to be the user's alone", path, ok, err, fi.Mode())
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return m.Put(keySchema, be.AppendUint64(nil, schemaVersion+1))
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}

	db, err := Open(path, Options{})
	if err == nil {
		db.Close()
		t.Fatalf("Open of a schema %d file succeeded, want an error", schemaVersion+1)
	}
	want := fmt.Sprintf("schema version %d is newer", schemaVersion+1)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open() = %q, want it to name %s and say %q", err, path, want)
	}

	// The refused file is untouched and can still be opened by bbolt.
	b, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("file locked or damaged after a refused Open: %v", err)
	}
	b.Close()
}

func TestOpenWritesSchemaVersion(t *testing.T) {
	db := mustOpen(t)
	var got uint64
	db.bolt.View(func(tx *bolt.Tx) error {
		got = be.Uint64(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	})
	if got != schemaVersion {
		t.Errorf("schema version = %d, want %d", got, schemaVersion)
	}
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	db := mustOpenAt(t, path, Options{})
	startWriter(t, db)

	code := 3
	t0 := time.Now().Add(-time.Hour).UTC() // recent: Open prunes runs older than a week
	runs := []Record{
		{ID: NewRunID(), Kind: KindBuild, Argv: []string{"flutter", "build", "apk"}, Root: "/w/app", State: StateExited, PID: 10, PIDStart: 111, ExitCode: &code, StartedAt: t0, EndedAt: t0.Add(time.Minute), Error: "build failed"},
		{ID: NewRunID(), Kind: KindRun, Argv: []string{"flutter", "run", "--machine"}, Root: "/w/app", State: StateRunning, PID: 20, PIDStart: 222, StartedAt: t0, AppID: "app-1", VMServiceURI: "ws://127.0.0.1:1/ws", DTDURI: "ws://127.0.0.1:2/ws"},
		{ID: NewRunID(), Kind: KindTool, Argv: []string{"flutter", "doctor"}, State: StateStarting, StartedAt: t0},
		{ID: NewRunID(), Kind: KindRun, State: StateStopped, StartedAt: t0, EndedAt: t0.Add(time.Hour)},
	}
	for _, r := range runs {
		mustPutRun(t, db, r)
	}
	for i := range 500 {
		for _, r := range runs[:2] {
			e := Entry{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i)), Stream: []string{"stdout", "stderr", "event", "fly", "custom"}[i%5], Text: fmt.Sprintf("line %d of %s", i, r.ID), Truncated: i%7 == 0}
			if err := db.Append(r.ID, e); err != nil {
				t.Fatalf("Append = %v", err)
			}
		}
	}
	mustFlush(t, db)

	type snapshot struct {
		runs  []Record
		logs  map[string][]Entry
		stats map[string]LogMeta
	}
	take := func(db *DB) snapshot {
		t.Helper()
		s := snapshot{logs: map[string][]Entry{}, stats: map[string]LogMeta{}}
		var err error
		if s.runs, err = db.Runs(); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if s.logs[r.ID], err = db.Logs(r.ID, 0, 0); err != nil {
				t.Fatal(err)
			}
			if s.stats[r.ID], err = db.LogStats(r.ID); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	before := take(db)
	if len(before.runs) != len(runs) || before.runs[0].ID != runs[len(runs)-1].ID {
		t.Fatalf("Runs() = %d runs starting %s, want %d newest first", len(before.runs), before.runs[0].ID, len(runs))
	}
	if got := before.stats[runs[0].ID]; got != (LogMeta{FirstSeq: 1, LastSeq: 500, Entries: 500, Bytes: got.Bytes}) || got.Bytes == 0 {
		t.Errorf("LogStats before reopen = %+v", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpenAt(t, path, Options{})
	after := take(db)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("after reopen the store differs:\nbefore %+v\nafter  %+v", before, after)
	}
	for i, r := range after.runs {
		want := runs[len(runs)-1-i]
		if r.StartedAt.Equal(want.StartedAt) {
			r.StartedAt = want.StartedAt
		}
		if r.EndedAt.Equal(want.EndedAt) {
			r.EndedAt = want.EndedAt
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("run %d after reopen = %+v, want %+v", i, r, want)
		}
	}
	if got, want := after.logs[runs[0].ID][41], (Entry{Seq: 42, Time: t0.Add(41), Stream: "stderr", Text: "line 41 of " + runs[0].ID}); !got.Time.Equal(want.Time) || got.Seq != want.Seq || got.Stream != want.Stream || got.Text != want.Text || got.Truncated {
		t.Errorf("entry 42 after reopen = %+v, want %+v", got, want)
	}

	// Seq continues where it stopped, given or assigned.
	startWriter(t, db)
	id := runs[0].ID
	st, err := db.LogStats(id)
	if err != nil {
		t.Fatal(err)
	}
	db.Append(id, Entry{Seq: st.LastSeq + 1, Text: "given"})
	db.Append(id, Entry{Text: "assigned"})
	mustFlush(t, db)
	got, err := db.Tail(id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 501 || got[0].Text != "given" || got[1].Seq != 502 || got[1].Text != "assigned" {
		t.Errorf("Tail(2) after reopen = %+v, want seqs 501 given, 502 assigned", got)
	}

	// MarkInterrupted changes the live runs only.
	marked, _, err := db.MarkInterrupted(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != 2 || marked[0].ID != runs[1].ID || marked[1].ID != runs[2].ID {
		t.Fatalf("MarkInterrupted() = %+v, want runs %s and %s", marked, runs[1].ID, runs[2].ID)
	}
	for i, r := range runs {
		got, err := db.GetRun(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := r.State
		if r.State.Live() {
			want = StateInterrupted
			if got.EndedAt.IsZero() {
				t.Errorf("run %d: interrupted with no EndedAt", i)
			}
		}
		if got.State != want {
			t.Errorf("run %d state = %s, want %s", i, got.State, want)
		}
	}
	if marked, _, err := db.MarkInterrupted(nil); err != nil || len(marked) != 0 {
		t.Errorf("second MarkInterrupted() = %v, %v, want nothing", marked, err)
	}
}

func TestNotFound(t *testing.T) {
	db := mustOpen(t)
	if _, err := db.GetRun("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(nope) = %v, want ErrNotFound", err)
	}
	if _, err := db.Logs("nope", 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(nope) = %v, want ErrNotFound", err)
	}
	if _, err := db.LogStats("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LogStats(nope) = %v, want ErrNotFound", err)
	}
	// A run with a record but no log yet has an empty one.
	mustPutRun(t, db, Record{ID: "r1", State: StateStarting})
	if es, err := db.Tail("r1", 10); err != nil || len(es) != 0 {
		t.Errorf("Tail(r1) = %v, %v, want none", es, err)
	}
	if m, err := db.LogStats("r1"); err != nil || m != (LogMeta{}) {
		t.Errorf("LogStats(r1) = %+v, %v, want zero", m, err)
	}
}

func TestCompaction(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := owner.MkdirPrivate(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fly.db")
	db := mustOpenAt(t, path, Options{})
	startWriter(t, db)
	text := strings.Repeat("x", 1000)
	var ids []string
	for range 4 {
		id := NewRunID()
		ids = append(ids, id)
		mustPutRun(t, db, Record{ID: id, State: StateExited, StartedAt: time.Now()})
		for i := range 2000 {
			if err := db.Append(id, Entry{Stream: "stdout", Text: text}); err != nil {
				t.Fatalf("Append = %v", err)
			}
			if i%1000 == 999 {
				mustFlush(t, db) // stay below the queue's size
			}
		}
	}
	mustFlush(t, db)
	keep, err := db.Logs(ids[3], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	big := fileSize(t, path)
	if big < 4*compactMinSize {
		t.Fatalf("file is %d bytes, want a bigger one to compact", big)
	}

	// KeepRuns 1: Open prunes three runs out of four, then compacts.
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	os.SameFile(before, before) // reads its file ID now: on Windows, os reads it by path at the first SameFile
	db = mustOpenAt(t, path, Options{KeepRuns: 1})
	small := fileSize(t, path)
	if fi, err := os.Stat(path); err != nil || os.SameFile(before, fi) {
		t.Errorf("Open did not replace the sparse file (%v)", err)
	}
	if small > big/2 {
		t.Errorf("size after pruning 3/4 of the data = %d, want at most half of %d", small, big)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	if !wine.Detected() { // Wine keeps no access lists
		assertPrivate(t, path)
	}
	got, err := db.Logs(ids[3], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, keep) {
		t.Errorf("log of the kept run changed by compaction: %d entries, want %d", len(got), len(keep))
	}
	if _, err := db.GetRun(ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(pruned) = %v, want ErrNotFound", err)
	}
	// The compacted file is a working store.
	startWriter(t, db)
	db.Append(ids[3], Entry{Text: "after"})
	mustFlush(t, db)
	if st, err := db.LogStats(ids[3]); err != nil || st.LastSeq != 2001 || st.Entries != 2001 {
		t.Errorf("LogStats after compaction = %+v, %v, want LastSeq 2001", st, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// And a dense file is left alone.
	dense, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mustOpenAt(t, path, Options{KeepRuns: 1})
	again, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(dense, again) || again.Size() != dense.Size() {
		t.Errorf("reopening a dense file rewrote it: %d bytes, then %d", dense.Size(), again.Size())
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestCache(t *testing.T) {
	db := mustOpen(t)
	if _, err := db.GetCache("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetCache of a new file = %v, want ErrNotFound", err)
	}
	if err := db.PutCache("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutCache("k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := db.GetCache("k"); err != nil || string(v) != "v2" {
		t.Fatalf("GetCache = %q, %v; want v2", v, err)
	}
	if err := db.PutCache("big", make([]byte, MaxCacheValue+1)); err == nil {
		t.Fatal("an oversized value was stored")
	}
}

// TestSessionsBoundedByBytes: ended sessions whose clients gave huge
// names keep the file small: each string is cut, and the oldest go once
// the bucket passes its byte bound.
func TestSessionsBoundedByBytes(t *testing.T) {
	db := mustOpen(t)
	huge := strings.Repeat("n", 1<<20)
	now := time.Now()
	for i := range 300 {
		if err := db.PutSession(Session{ID: fmt.Sprint(i), ClientName: huge, Workspace: "/w", Since: now, Ended: now.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Sessions("/w", 1000)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range got {
		if len(s.ClientName) > maxSessionField {
			t.Fatalf("a stored client name is %d bytes", len(s.ClientName))
		}
		total += len(s.ClientName)
	}
	if total > maxSessionBytes || len(got) == 0 || got[0].ID != "299" {
		t.Fatalf("%d sessions kept, %d bytes of names, newest %q", len(got), total, got[0].ID)
	}
	if size, err := db.Size(); err != nil || size > 8<<20 {
		t.Fatalf("fly.db is %d bytes after 300 sessions with 1 MiB names (%v)", size, err)
	}
}

// TestPruneAsRunsEnd: while the file is open, each finished run that is
// queued prunes the oldest beyond the bound, and upstream records are
// counted apart: a crash-looping upstream never pushes the user's runs
// out, and its own records stay bounded.
func TestPruneAsRunsEnd(t *testing.T) {
	db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{KeepRuns: 10})
	now := time.Now()
	put := func(kind Kind) {
		t.Helper()
		code := 1
		r := Record{ID: NewRunID(), Kind: kind, Root: "/w", State: StateFailed, StartedAt: now, EndedAt: now, ExitCode: &code}
		if err := db.QueueRun(r); err != nil {
			t.Fatal(err)
		}
		if err := db.Append(r.ID, Entry{Text: "a line"}); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		put(KindRun)
	}
	for range 200 { // an upstream that crashes again and again
		put(KindUpstream)
	}
	recs, err := db.Runs()
	if err != nil {
		t.Fatal(err)
	}
	count := map[Kind]int{}
	for _, r := range recs {
		count[r.Kind]++
	}
	if count[KindRun] != 10 || count[KindUpstream] != 10 {
		t.Fatalf("after 10 runs and 200 upstream restarts the store keeps %v, want 10 runs and 10 upstream records", count)
	}
	for range 15 {
		put(KindBuild)
	}
	if recs, _ = db.Runs(); len(recs) != 20 {
		t.Fatalf("%d records kept, want 20", len(recs))
	}
}
