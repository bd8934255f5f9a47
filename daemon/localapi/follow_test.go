package localapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// This file holds the tests of following a run's log (follow=1): heartbeats, gaps, stalls.

// follower is a follow=1 stream read by a goroutine.
type follower struct {
	lines chan ndLine
	done  chan struct{} // closed at the stream's end
	err   error         // why it ended, nil at EOF; set before done is closed
}

func (a *apiServer) follow(t testing.TB, id, query string) *follower {
	t.Helper()
	resp := a.do(t, "GET", "/v1/runs/"+id+"/logs?follow=1&"+query)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("follow %s = %s %s", query, resp.Status, b)
	}
	f := &follower{lines: make(chan ndLine, 1<<20), done: make(chan struct{})}
	go func() { // owned by f: ends when the body ends or is closed (Cleanup)
		defer close(f.done)
		_, f.err = decodeLines(resp.Body, f.lines)
	}()
	t.Cleanup(func() {
		resp.Body.Close()
		<-f.done
	})
	return f
}

// next returns the next line, failing the test after d.
func (f *follower) next(t testing.TB, d time.Duration) ndLine {
	t.Helper()
	select {
	case l := <-f.lines:
		return l
	case <-time.After(d):
		t.Fatalf("no log line within %s", d)
	}
	panic("unreachable")
}

// until reads lines until one satisfies ok, returning all of them.
func (f *follower) until(t testing.TB, d time.Duration, ok func(ndLine) bool) []ndLine {
	t.Helper()
	deadline := time.After(d)
	var got []ndLine
	for {
		select {
		case l := <-f.lines:
			got = append(got, l)
			if ok(l) {
				return got
			}
		case <-deadline:
			t.Fatalf("no matching log line within %s; got %d lines, last %+v", d, len(got), lastLine(got))
		}
	}
}

// TestHTTPRunsFollow follows a live run from its start, stops it, and
// gets every line once and then the exit record; a follow of an ended run
// gets its history and the same exit record at once.
func TestHTTPRunsFollow(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=20")
	f := a.follow(t, r.ID(), "after=0")
	seen := r.Ring().Last()
	// Lines printed after the follow began arrive live.
	got := f.until(t, 30*time.Second, func(l ndLine) bool { return l.Type == wire.LogLineEntry && l.Seq > seen+3 })

	var stopped wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &stopped)
	got = append(got, f.until(t, 30*time.Second, func(l ndLine) bool { return l.Type == wire.LogLineExit })...)
	select {
	case <-f.done:
		if f.err != nil {
			t.Errorf("follow ended with %v, want EOF after the exit line", f.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after its exit line")
	}
	exit := got[len(got)-1]
	last := checkContiguous(t, got, 0)
	if exit.State != "stopped" || exit.ExitCode == nil || *exit.ExitCode != *stopped.ExitCode || exit.LastSeq != last || last != r.Ring().Last() {
		t.Errorf("exit line = %+v, want stopped, exit code %d, last_seq %d (ring %d)", exit, *stopped.ExitCode, last, r.Ring().Last())
	}
	if texts := entryTexts(got); !contains(texts, "stop requested") || !strings.HasPrefix(texts[len(texts)-1], "exited:") {
		t.Errorf("followed entries end with %q, want the stop and exit notes", texts[max(0, len(texts)-3):])
	}

	// The run has ended: a follow gets the tail and the exit line, and ends.
	lines := a.logs(t, r.ID(), "follow=1&tail=2")
	if len(lines) != 3 || lines[0].Seq != last-1 || lines[2].Type != wire.LogLineExit || lines[2].State != "stopped" || lines[2].LastSeq != last {
		t.Errorf("follow of an ended run = %+v, want 2 entries and the exit line", lines)
	}
}

func TestHTTPRunsHeartbeat(t *testing.T) {
	a := newAPIServer(t, serverConfig{Heartbeat: 200 * time.Millisecond}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=0")   // an idle app
	flytest.WaitLine(t, r.Ring(), "app.devTools") // its last event after app.started
	f := a.follow(t, r.ID(), "tail=0")
	for range 2 {
		l := f.next(t, 10*time.Second)
		if l.Type != wire.LogLineHeartbeat || l.LastSeq != r.Ring().Last() || l.Time.IsZero() {
			t.Fatalf("idle follow sent %+v, want a heartbeat at seq %d", l, r.Ring().Last())
		}
	}
	var stopped wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &stopped)
	got := f.until(t, 30*time.Second, func(l ndLine) bool { return l.Type == wire.LogLineExit })
	if exit := got[len(got)-1]; exit.State != "stopped" {
		t.Errorf("exit line %+v, want stopped", exit)
	}
}

// TestHTTPRunsGap: a reader whose cursor is older than what the log still
// holds gets one gap line that says how many lines it lost and where it
// resumes; what the ring evicted but the store keeps is read back whole.
func TestHTTPRunsGap(t *testing.T) {
	a := newAPIServer(t, serverConfig{RingEntries: 10}, store.Options{MaxLogEntries: 40}, false)
	r := a.start(t, fakeflutter.EnvLines+"=200", fakeflutter.EnvTickMS+"=1")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 200")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := a.db.LogStats(r.ID())
	if err != nil {
		t.Fatal(err)
	}
	last, ringFirst := r.Ring().Last(), r.Ring().First()
	if stored.FirstSeq <= 1 || stored.FirstSeq >= ringFirst || stored.LastSeq != last {
		t.Fatalf("store holds %d..%d, ring %d..%d: want the store to hold more than the ring and less than all", stored.FirstSeq, stored.LastSeq, ringFirst, last)
	}

	for _, follow := range []string{"0", "1"} {
		lines := a.logs(t, r.ID(), "tail=0&follow=0") // nothing but the end line
		if len(lines) != 1 {
			t.Fatalf("tail=0 = %+v", lines)
		}
		var got []ndLine
		if follow == "1" {
			f := a.follow(t, r.ID(), "after=0")
			got = f.until(t, 30*time.Second, func(l ndLine) bool { return l.Seq == last })
		} else {
			got = a.logs(t, r.ID(), "after=0")
		}
		gap := got[0]
		if gap.Type != wire.LogLineGap || gap.Lost != stored.FirstSeq-1 || gap.Resume != stored.FirstSeq || !strings.Contains(gap.Text, "lost") {
			t.Errorf("follow=%s after=0: first line %+v, want a gap of %d lines resuming at %d", follow, gap, stored.FirstSeq-1, stored.FirstSeq)
		}
		if end := checkContiguous(t, got, 0); end != last {
			t.Errorf("follow=%s: lines end at seq %d, want %d", follow, end, last)
		}
		if n := len(entryTexts(got)); uint64(n) != last-stored.FirstSeq+1 {
			t.Errorf("follow=%s: %d entries, want the %d the store holds", follow, n, last-stored.FirstSeq+1)
		}
	}

	// Evicted from the ring but kept in the store: no gap.
	after := stored.FirstSeq + 2
	got := a.logs(t, r.ID(), "after="+strconv.FormatUint(after, 10))
	if got[0].Type != wire.LogLineEntry || got[0].Seq != after+1 {
		t.Errorf("after=%d (in the store, not the ring): first line %+v, want entry %d", after, got[0], after+1)
	}
	checkContiguous(t, got, after)
}

// TestHTTPRunsStalledFollower: a follower that never reads does not delay
// another follower; its write deadline cuts it, and it resumes from its
// cursor with nothing duplicated or skipped unreported.
func TestHTTPRunsStalledFollower(t *testing.T) {
	const lines = 50000
	// The write deadline cuts the stalled follower; it must not cut the
	// reading one on a loaded machine too (one second did, under -race
	// beside another suite).
	a := newAPIServer(t, serverConfig{WriteTimeout: 5 * time.Second}, store.Options{}, true)
	r := a.start(t, fakeflutter.EnvStartupMS+"=300", fakeflutter.EnvLinesPerSec+"=0", fakeflutter.EnvLines+"="+strconv.Itoa(lines))

	// The stalled follower sends its request and never reads.
	conn, err := a.c.Transport.(*http.Transport).DialContext(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", a.url+"/v1/runs/"+r.ID()+"/logs?follow=1&after=0", nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	f := a.follow(t, r.ID(), "after=0")
	last := fmt.Sprintf("flutter: tick %d", lines)
	got := f.until(t, 60*time.Second, func(l ndLine) bool { return l.Text == last })
	t.Logf("the reading follower got %d lines (%d entries) in %s while the other was stuck", len(got), len(entryTexts(got)), time.Since(start))
	checkContiguous(t, got, 0)

	// Wait until flyd has cut the stalled follower for missing its write
	// deadline. Then stop the run: a follower still connected would get
	// the exit line.
	flytest.Eventually(t, "the stalled follower cut by its write deadline", func() bool { return a.api.FollowersCut() > 0 })
	var stopped wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &stopped)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	stalled, err := decodeLines(resp.Body, nil)
	resp.Body.Close()
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled follower's stream ended with %v, want it cut by flyd", err)
	}
	if l := lastLine(stalled); l.Type == wire.LogLineExit {
		t.Fatalf("stalled follower got the exit line: it was not cut")
	}
	cursor := checkContiguous(t, stalled, 0)
	if cursor >= r.Ring().Last() {
		t.Fatalf("stalled follower got everything (seq %d): it was never stalled", cursor)
	}

	// It resumes from its cursor.
	rest := a.logs(t, r.ID(), "follow=1&after="+strconv.FormatUint(cursor, 10))
	end := checkContiguous(t, rest, cursor)
	if exit := lastLine(rest); exit.Type != wire.LogLineExit || exit.State != "stopped" || end != r.Ring().Last() {
		t.Errorf("resumed follow ends with %+v at seq %d, want the exit line at seq %d", exit, end, r.Ring().Last())
	}
	t.Logf("stalled follower cut at seq %d, resumed to %d", cursor, end)
}

// TestHTTPRunsFollowerCatchesUpFromStore: a follower that fell behind the
// ring while its connection was blocked gets what the ring evicted from
// the store, with no gap, when the store still holds it.
func TestHTTPRunsFollowerCatchesUpFromStore(t *testing.T) {
	const lines = 20000
	a := newAPIServer(t, serverConfig{RingEntries: 10, WriteTimeout: time.Minute}, store.Options{QueueSize: 1 << 16}, true)
	r := a.start(t, fakeflutter.EnvStartupMS+"=300", fakeflutter.EnvLinesPerSec+"=0", fakeflutter.EnvLines+"="+strconv.Itoa(lines))

	conn, err := a.c.Transport.(*http.Transport).DialContext(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", a.url+"/v1/runs/"+r.ID()+"/logs?follow=1&after=0", nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	// The follower reads nothing until the whole burst is in: its handler
	// blocks on the full socket while the ring moves on.
	flytest.WaitLine(t, r.Ring(), fmt.Sprintf("flutter: tick %d", lines))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.db.LogStats(r.ID()); st.FirstSeq != 1 || st.Dropped != 0 {
		t.Fatalf("store log %+v: want every entry kept", st)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeLines(resp.Body, nil)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("follow: %v after %d lines", err, len(got))
	}
	for _, l := range got {
		if l.Type == wire.LogLineGap {
			t.Fatalf("gap line %+v: the store held those entries", l)
		}
	}
	end := checkContiguous(t, got, 0)
	if exit := lastLine(got); exit.Type != wire.LogLineExit || end != r.Ring().Last() {
		t.Errorf("follow ends with %+v at seq %d, want the exit line at seq %d", exit, end, r.Ring().Last())
	}
}
