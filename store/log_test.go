package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestGroupCommit(t *testing.T) {
	db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{QueueSize: 16384})
	startWriter(t, db)
	runs := []string{NewRunID(), NewRunID(), NewRunID()}
	for _, id := range runs {
		mustPutRun(t, db, Record{ID: id, State: StateRunning})
	}
	const n = 10_000
	for i := range n {
		id := runs[i%3]
		e := Entry{Seq: uint64(i/3 + 1), Stream: "stdout", Text: fmt.Sprintf("%s %d", id, i)}
		if err := db.Append(id, e); err != nil {
			t.Fatalf("Append #%d = %v", i, err)
		}
	}
	mustFlush(t, db)

	total := 0
	for r, id := range runs {
		got, err := db.Logs(id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		total += len(got)
		for j, e := range got {
			if want := fmt.Sprintf("%s %d", id, j*3+r); e.Seq != uint64(j+1) || e.Text != want {
				t.Fatalf("run %d entry %d = seq %d %q, want seq %d %q", r, j, e.Seq, e.Text, j+1, want)
			}
		}
	}
	if total != n {
		t.Errorf("read back %d entries, want %d", total, n)
	}
	if c := db.commits.Load(); c == 0 || c > n/20 {
		t.Errorf("%d entries took %d bbolt transactions, want far fewer (at most %d)", n, c, n/20)
	}
	t.Logf("%d entries in %d transactions", n, db.commits.Load())
}

// stallWriter makes db's next commit wait until the returned release is
// called, and returns a channel closed once the writer is stalled.
func stallWriter(t *testing.T, db *DB) (stalled <-chan struct{}, release func()) {
	t.Helper()
	st := make(chan struct{})
	rel := make(chan struct{})
	first := true
	db.beforeCommit = func() { // called by the one writer only
		if first {
			first = false
			close(st)
			<-rel
		}
	}
	var once bool
	return st, func() {
		if !once {
			once = true
			close(rel)
		}
	}
}

// TestAppendWaitsNeverDrops stalls the writer and fills its queue: Append
// then waits for room instead of dropping, and every entry is stored.
func TestAppendWaitsNeverDrops(t *testing.T) {
	const queue = 8
	db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{QueueSize: queue})
	stalled, release := stallWriter(t, db)
	defer release()
	startWriter(t, db)
	a := NewRunID()
	mustPutRun(t, db, Record{ID: a, State: StateRunning})

	if err := db.Append(a, Entry{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	<-stalled // the writer holds "first" and waits in its commit
	for i := range queue {
		if err := db.Append(a, Entry{Text: fmt.Sprint("queued ", i)}); err != nil {
			t.Fatalf("Append #%d with room in the queue = %v", i, err)
		}
	}
	const more = 5
	done := make(chan error, 1)
	go func() { // owned by the test: ends once the writer makes room
		for i := range more {
			if err := db.Append(a, Entry{Text: fmt.Sprint("waited ", i)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for db.Waits() == 0 {
		select {
		case err := <-done:
			t.Fatalf("Append to a full queue returned (%v) before the writer made room", err)
		case <-time.After(time.Millisecond):
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Append after the writer made room = %v", err)
	}
	mustFlush(t, db)
	if st, err := db.LogStats(a); err != nil || st.Entries != queue+1+more || st.Dropped != 0 {
		t.Errorf("LogStats(a) = %+v, %v, want %d entries, 0 dropped", st, err, queue+1+more)
	}
}

// TestAppendWithoutWriter fills the queue while no writer runs: Append
// commits the queue itself rather than wait forever.
func TestAppendWithoutWriter(t *testing.T) {
	const queue = 4
	db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), Options{QueueSize: queue})
	a := NewRunID()
	for i := range 3 * queue {
		if err := db.Append(a, Entry{Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, db)
	if st, _ := db.LogStats(a); st.Entries != 3*queue {
		t.Errorf("%d entries stored, want %d", st.Entries, 3*queue)
	}
}

func TestLogCap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		text       string
		wantFirst  uint64
		wantKept   uint64
		totalLines int
	}{
		{"entries", Options{MaxLogEntries: 100}, "0123456789", 901, 100, 1000},
		{"bytes", Options{MaxLogBytes: 1000}, strings.Repeat("y", 100), 991, 10, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := mustOpenAt(t, filepath.Join(t.TempDir(), "fly.db"), tc.opts)
			startWriter(t, db)
			id := NewRunID()
			mustPutRun(t, db, Record{ID: id, State: StateRunning})
			for i := range tc.totalLines {
				if err := db.Append(id, Entry{Text: tc.text}); err != nil {
					t.Fatal(err)
				}
				if i%300 == 0 {
					mustFlush(t, db) // several commits, some within the cap
				}
			}
			mustFlush(t, db)
			want := LogMeta{FirstSeq: tc.wantFirst, LastSeq: uint64(tc.totalLines), Entries: tc.wantKept, Bytes: tc.wantKept * uint64(len(tc.text))}
			if st, err := db.LogStats(id); err != nil || st != want {
				t.Errorf("LogStats = %+v, %v, want %+v", st, err, want)
			}
			es, err := db.Logs(id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if uint64(len(es)) != tc.wantKept || es[0].Seq != tc.wantFirst || es[len(es)-1].Seq != uint64(tc.totalLines) {
				t.Errorf("Logs = %d entries, seq %d..%d, want %d, %d..%d", len(es), es[0].Seq, es[len(es)-1].Seq, tc.wantKept, tc.wantFirst, tc.totalLines)
			}
		})
	}
}

func TestLogsPaging(t *testing.T) {
	db := mustOpen(t)
	id := NewRunID()
	mustPutRun(t, db, Record{ID: id, State: StateRunning})
	for i := range 20 {
		db.Append(id, Entry{Seq: uint64(i + 1), Text: fmt.Sprint(i + 1)})
	}
	mustFlush(t, db) // no writer running: Flush commits the queue itself

	seqs := func(es []Entry) []uint64 {
		var s []uint64
		for _, e := range es {
			s = append(s, e.Seq)
		}
		return s
	}
	for _, tc := range []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 3, []uint64{1, 2, 3}},
		{17, 0, []uint64{18, 19, 20}},
		{17, 10, []uint64{18, 19, 20}},
		{20, 0, nil},
		{1<<64 - 1, 0, nil},
	} {
		got, err := db.Logs(id, tc.after, tc.limit)
		if err != nil || !reflect.DeepEqual(seqs(got), tc.want) {
			t.Errorf("Logs(%d, %d) = %v, %v, want %v", tc.after, tc.limit, seqs(got), err, tc.want)
		}
	}
	for _, tc := range []struct {
		n    int
		want []uint64
	}{
		{0, nil},
		{2, []uint64{19, 20}},
		{50, seqs(must(db.Logs(id, 0, 0)))},
	} {
		got, err := db.Tail(id, tc.n)
		if err != nil || !reflect.DeepEqual(seqs(got), tc.want) {
			t.Errorf("Tail(%d) = %v, %v, want %v", tc.n, seqs(got), err, tc.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRewriteSeq(t *testing.T) {
	db := mustOpen(t)
	id := NewRunID()
	mustPutRun(t, db, Record{ID: id, State: StateRunning})
	db.Append(id, Entry{Seq: 1, Text: "aaaa"})
	db.Append(id, Entry{Seq: 2, Text: "bb"})
	mustFlush(t, db)
	db.Append(id, Entry{Seq: 1, Text: "c"})
	mustFlush(t, db)
	want := LogMeta{FirstSeq: 1, LastSeq: 2, Entries: 2, Bytes: 3}
	if st, err := db.LogStats(id); err != nil || st != want {
		t.Errorf("LogStats after rewriting seq 1 = %+v, %v, want %+v", st, err, want)
	}
}

func TestEntryEncoding(t *testing.T) {
	t0 := time.Unix(1700000000, 123456789)
	for _, e := range []Entry{
		{Seq: 1, Time: t0, Stream: "stdout", Text: "hello"},
		{Seq: 2, Time: t0, Stream: "stderr", Text: "", Truncated: true},
		{Seq: 3, Time: t0, Stream: "event", Text: `[{"event":"app.log"}]`},
		{Seq: 4, Time: t0, Stream: "fly", Text: "héllo\x00wörld"},
		{Seq: 5, Time: t0, Stream: "", Text: "no stream"},
		{Seq: 1 << 60, Time: time.Unix(0, 1), Stream: "a custom stream", Text: strings.Repeat("z", 9000), Truncated: true},
	} {
		v := appendEntry(nil, e)
		if len(v) > encodedLen(e) {
			t.Errorf("appendEntry(%v) is %d bytes, more than encodedLen %d", e.Seq, len(v), encodedLen(e))
		}
		if n := textLen(v); n != len(e.Text) {
			t.Errorf("textLen(appendEntry(%d)) = %d, want %d", e.Seq, n, len(e.Text))
		}
		got, err := decodeEntry(be.AppendUint64(nil, e.Seq), v)
		if err != nil || !got.Time.Equal(e.Time) || got.Seq != e.Seq || got.Stream != e.Stream || got.Text != e.Text || got.Truncated != e.Truncated {
			t.Errorf("decodeEntry(appendEntry(%+v)) = %+v, %v", e, got, err)
		}
	}
	for _, v := range [][]byte{nil, {0, 1, 0}, append(make([]byte, 10), 0x80), {0, 9, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := decodeEntry(make([]byte, 8), v); err == nil {
			t.Errorf("decodeEntry(%x) succeeded, want an error", v)
		}
	}
}

func TestFlushAndCloseWithoutWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	db := mustOpenAt(t, path, Options{})
	id := NewRunID()
	mustPutRun(t, db, Record{ID: id, State: StateRunning})
	db.Append(id, Entry{Text: "one"})
	mustFlush(t, db)
	if st, _ := db.LogStats(id); st.Entries != 1 {
		t.Errorf("after Flush with no writer: %d entries, want 1", st.Entries)
	}
	db.Append(id, Entry{Text: "two"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Append(id, Entry{Text: "three"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := db.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Errorf("Flush after Close = %v, want nil", err)
	}
	db = mustOpenAt(t, path, Options{})
	if st, _ := db.LogStats(id); st.Entries != 2 {
		t.Errorf("after Close with no writer: %d entries, want 2", st.Entries)
	}
}

func TestCloseStopsWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- db.Run(context.Background()) }() // ended by Close below
	// A Run that starts after Close rightly returns ErrClosed.
	waitWriter(t, db)
	id := NewRunID()
	mustPutRun(t, db, Record{ID: id, State: StateRunning})
	for range 1000 {
		db.Append(id, Entry{Text: "x"})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running after Close")
	}
	db = mustOpenAt(t, path, Options{})
	if st, _ := db.LogStats(id); st.Entries != 1000 {
		t.Errorf("after Close: %d entries, want 1000", st.Entries)
	}
}

// waitWriter waits until a Run has become db's writer.
func waitWriter(t testing.TB, db *DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		db.writerMu.Lock()
		running := db.stopped != nil
		db.writerMu.Unlock()
		if running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never became the writer")
		}
	}
}

func TestSecondRunRefused(t *testing.T) {
	db := mustOpen(t)
	startWriter(t, db)
	for { // wait until the first Run is the writer
		db.writerMu.Lock()
		running := db.stopped != nil
		db.writerMu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := db.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run() = %v, want already running", err)
	}
}

// TestWriterWindow checks, in a bubble with a fake clock, that entries are
// committed one batch window after the first of them without any Flush,
// and that Run leaves no goroutine behind.
func TestWriterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "fly.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- db.Run(ctx) }() // ended by cancel below
		id := NewRunID()
		mustPutRun(t, db, Record{ID: id, State: StateRunning})
		for range 10 {
			db.Append(id, Entry{Text: "x"})
		}
		synctest.Wait()
		if st, _ := db.LogStats(id); st.Entries != 0 {
			t.Errorf("before the window: %d entries committed, want 0", st.Entries)
		}
		time.Sleep(batchWindow)
		synctest.Wait()
		if st, _ := db.LogStats(id); st.Entries != 10 {
			t.Errorf("after the window: %d entries committed, want 10", st.Entries)
		}
		if c := db.commits.Load(); c != 1 {
			t.Errorf("%d commits, want 1", c)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}

// TestWriterWindowAfterPoke: a poke left from a Flush the writer had
// already served, found with entries queued behind it, must not leave
// them waiting for the next whole batch or Flush (a stopped window
// timer). The writer is started with both at hand, in a bubble with a
// fake clock, many times: it picks either first at random.
func TestWriterWindowAfterPoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "fly.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		id := NewRunID()
		mustPutRun(t, db, Record{ID: id, State: StateRunning})
		for i := range 40 {
			for range 3 {
				db.Append(id, Entry{Text: "x"})
			}
			db.poke() // as a Flush does, its token left over
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- db.Run(ctx) }() // ended by cancel below
			// The bubble's fake clock: the window passing is the condition
			// (a stuck writer has no event to wait on), and it costs no time.
			time.Sleep(batchWindow)
			synctest.Wait()
			st, _ := db.LogStats(id)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run() = %v", err)
			}
			if want := uint64(3 * (i + 1)); st.LastSeq != want {
				t.Fatalf("start %d: %d entries committed a window after they were queued, want %d", i, st.LastSeq, want)
			}
		}
	})
}

// TestConcurrentUse appends from several goroutines while others flush and
// the writer is stopped and restarted, then closes: every entry is
// stored, in order.
func TestConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fly.db")
	db, err := Open(path, Options{QueueSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	const producers, perRun = 4, 3000
	ids := make([]string, producers)
	for i := range ids {
		ids[i] = NewRunID()
		mustPutRun(t, db, Record{ID: ids[i], State: StateRunning})
	}

	var wg sync.WaitGroup // owns every goroutine below
	stop := make(chan struct{})
	for _, id := range ids {
		wg.Go(func() {
			for i := range perRun {
				db.Append(id, Entry{Text: fmt.Sprint(i)})
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := db.Flush(t.Context()); err != nil {
					t.Errorf("Flush() = %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() { // the writer, stopped and started again
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
			err := db.Run(ctx)
			cancel()
			select {
			case <-stop:
				return
			default:
			}
			if err != nil {
				t.Errorf("Run() = %v", err)
				return
			}
		}
	})
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, id := range ids { // the producers are done: this is after them
		for i := range 10 {
			db.Append(id, Entry{Text: fmt.Sprint(perRun + i)})
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpenAt(t, path, Options{})
	for _, id := range ids {
		st, err := db.LogStats(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Entries != perRun+10 || st.Dropped != 0 {
			t.Errorf("run %s: %d entries, %d dropped, want %d and none", id, st.Entries, st.Dropped, perRun+10)
		}
		es, err := db.Logs(id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		prev := -1
		for _, e := range es {
			var n int
			fmt.Sscan(e.Text, &n)
			if n <= prev {
				t.Fatalf("run %s: entry %q after %d, want Append order", id, e.Text, prev)
			}
			prev = n
		}
	}
}

// TestAppendGroupMark: a group's entries and its mark are committed
// together, the mark only rising; a log meta of version 1 reads with no
// mark.
func TestAppendGroupMark(t *testing.T) {
	db := mustOpen(t)
	id := NewRunID()
	mustPutRun(t, db, Record{ID: id, State: StateRunning})
	if err := db.AppendGroup(id, []Entry{{Seq: 1, Text: "a"}, {Seq: 2, Text: "b"}}, 7); err != nil {
		t.Fatal(err)
	}
	db.Append(id, Entry{Seq: 3, Text: "note"})
	db.AppendGroup(id, []Entry{{Seq: 4, Text: "c"}}, 9)
	db.AppendGroup(id, nil, 8) // an older mark does not go back
	mustFlush(t, db)
	st, err := db.LogStats(id)
	if err != nil || st.Mark != 9 || st.LastSeq != 4 || st.Entries != 4 {
		t.Fatalf("LogStats = %+v, %v; want mark 9 after 4 entries", st, err)
	}
	// A file written before marks existed.
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		v := []byte{1}
		for _, n := range []uint64{1, 4, 4, 6, 0} {
			v = be.AppendUint64(v, n)
		}
		return tx.Bucket(bucketLogs).Bucket([]byte(id)).Put(keyLogMeta, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := db.LogStats(id); err != nil || st != (LogMeta{FirstSeq: 1, LastSeq: 4, Entries: 4, Bytes: 6}) {
		t.Errorf("LogStats of a version-1 meta = %+v, %v", st, err)
	}
}
