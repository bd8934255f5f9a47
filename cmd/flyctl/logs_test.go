package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
)

// follower is a "flyctl logs tail -f" running in the background.
type follower struct {
	stdout, stderr flytest.Buffer
	done           chan error
	cancel         context.CancelFunc
}

func startFollow(t *testing.T, getenv func(string) string, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	f := &follower{done: make(chan error, 1), cancel: cancel}
	go func() { // owned by f: waited for by wait or Cleanup
		f.done <- run(ctx, append([]string{"logs", "tail"}, args...), getenv, strings.NewReader(""), &f.stdout, &f.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		f.done <- <-f.done
	})
	return f
}

// waitLines waits until the follower printed at least n lines with text
// containing sub.
func (f *follower) waitLines(t *testing.T, sub string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(f.stdout.String(), sub) < n {
		select {
		case err := <-f.done:
			f.done <- err
			t.Fatalf("the follow ended early (%v)\nstdout:\n%s\nstderr:\n%s", err, f.stdout.String(), f.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follow printed fewer than %d lines with %q within 60s\nstdout:\n%s\nstderr:\n%s", n, sub, f.stdout.String(), f.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for the follow to end and returns its error.
func (f *follower) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(90 * time.Second):
		t.Fatalf("the follow did not end within 90s\nstdout:\n%s\nstderr:\n%s", f.stdout.String(), f.stderr.String())
		return nil
	}
}

// checkFollowed checks followed -o json output: each seq once, strictly
// increasing, no gap line, an exit line last with state want. It returns
// the entries by seq.
func checkFollowed(t *testing.T, out, want string) map[int]string {
	t.Helper()
	lines := jsonLines(t, out)
	if len(lines) == 0 {
		t.Fatal("the follow printed nothing")
	}
	last := lines[len(lines)-1]
	if last["type"] != "exit" || last["state"] != want {
		t.Errorf("the follow's last line = %v, want an exit line with state %q", last, want)
	}
	bySeq := map[int]string{}
	prev := 0
	for i, l := range lines[:len(lines)-1] {
		if want == "interrupted" && l["type"] == "gap" && i == len(lines)-3 {
			// After a crash flyd skips the seqs it may have published
			// without storing them; its interrupted note follows.
			continue
		}
		if l["type"] != "entry" {
			t.Errorf("line %v: want only entries before the exit line (no gap: nothing was evicted)", l)
			continue
		}
		seq := int(l["seq"].(float64))
		if seq <= prev {
			t.Errorf("seq %d after %d: want each seq once, strictly increasing", seq, prev)
		}
		prev = seq
		bySeq[seq] = fmt.Sprint(l["text"])
	}
	return bySeq
}

// TestFollowSurvivesFlydCrash: a follow resumes across a SIGKILLed and
// restarted flyd; the run lives on under its holder, its log holds every
// line once, and the follow goes on, with no gap, until the run is
// stopped. A seq never means two lines: the lines the dead flyd had shown
// but not stored are shown again, at new seqs, from the holder's spool.
func TestFollowSurvivesFlydCrash(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=30")
	flyd := flytest.StartFlyd(t, e)
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)

	cs.Close() // else its shim starts a flyd of its own as this one goes
	f := startFollow(t, e.Getenv, id, "-f", "-o", "json", "-n", "all")
	f.waitLines(t, "tick", 10)
	flyd.Kill(t)
	flytest.StartFlyd(t, e)
	f.waitLines(t, "tick", strings.Count(f.stdout.String(), "tick")+10) // from the next flyd
	mustFlyctl(t, e.Getenv, "stop", id)
	if err := f.wait(t); err != nil {
		t.Fatalf("the follow = %v, want nil\nstderr:\n%s", err, f.stderr.String())
	}
	followed := checkFollowed(t, f.stdout.String(), "stopped") // no gap: the holder spooled what flyd missed

	logged, texts, ticks := map[int]bool{}, map[string]bool{}, 0
	for _, l := range jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "all", "-o", "json")) {
		if l["type"] != "entry" {
			continue
		}
		seq, text := int(l["seq"].(float64)), fmt.Sprint(l["text"])
		logged[seq], texts[text] = true, true
		if got, ok := followed[seq]; ok && got != text {
			t.Errorf("seq %d is %q in the log, but %q was followed: a seq was reused", seq, text, got)
		}
		if n, ok := strings.CutPrefix(text, "flutter: tick "); ok {
			if ticks++; n != strconv.Itoa(ticks) {
				t.Errorf("the log's tick %s where tick %d was due: a line lost or stored twice", n, ticks)
			}
		}
	}
	for seq, text := range followed {
		if !logged[seq] && !texts[text] {
			t.Errorf("seq %d %q was followed, but the log does not hold it", seq, text)
		}
	}
}

// TestFollowSurvivesFlydCrashUnheld: the same with runs that end with
// flyd (--hold-runs=false): the follow resumes without printing a line
// twice or skipping one the next flyd has, and ends with the run marked
// interrupted.
func TestFollowSurvivesFlydCrashUnheld(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=30")
	flyd := flytest.StartFlyd(t, e, "--hold-runs=false")
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)

	cs.Close() // else its shim starts a flyd of its own as this one goes
	f := startFollow(t, e.Getenv, id, "-f", "-o", "json", "-n", "all")
	f.waitLines(t, "tick", 10)
	flyd.Kill(t) // lines not yet stored are lost: flyd says how many, and reuses no seq
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(f.stderr.String(), "reconnecting"); {
		if time.Now().After(deadline) {
			t.Fatalf("the follow did not notice flyd was gone\nstderr:\n%s", f.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	flytest.StartFlyd(t, e, "--hold-runs=false")
	if err := f.wait(t); err != nil {
		t.Fatalf("the follow = %v, want nil\nstderr:\n%s", err, f.stderr.String())
	}
	followed := checkFollowed(t, f.stdout.String(), "interrupted")
	if !strings.Contains(f.stderr.String(), "reconnecting") {
		t.Errorf("stderr = %q, want a note that it reconnects", f.stderr.String())
	}

	// Every line the restarted flyd has was followed, each seq meaning the
	// same line: flyd never reuses a seq a follower may have seen, even
	// for lines the crash lost before they were stored.
	for _, l := range jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "all", "-o", "json")) {
		if l["type"] != "entry" {
			continue // the crash's gap, checked above
		}
		seq, text := int(l["seq"].(float64)), fmt.Sprint(l["text"])
		got, ok := followed[seq]
		switch {
		case !ok:
			t.Errorf("seq %d %q is in the log but was not followed", seq, text)
		case got != text:
			t.Errorf("seq %d is %q in the log after the crash, but was %q when followed: a seq was reused", seq, text, got)
		}
	}
}

// TestFollowSurvivesDroppedConnections: with flyd alive, a follow whose
// connection is cut twice resumes each time without a duplicate or a
// hole, and ends when the run is stopped.
func TestFollowSurvivesDroppedConnections(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flytest.StartFlyd(t, e)
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)

	viaProxy := *e
	viaProxy.Paths.Socket = endpointOf(t, filepath.Join(e.Dir, "proxy.sock"))
	proxy := newEndpointProxy(t, viaProxy.Paths.Socket, e.Paths.Socket)
	f := startFollow(t, viaProxy.Getenv, id, "-f", "-o", "json", "-n", "3")
	f.waitLines(t, "tick", 5)
	for drop := 1; drop <= 2; drop++ {
		proxy.drop()
		// The follow noticed (its note), then has lines from its new
		// connection: only then is the next drop a drop of its own.
		flytest.Eventually(t, fmt.Sprintf("reconnect note %d", drop), func() bool {
			return strings.Count(f.stderr.String(), "reconnecting") >= drop
		})
		f.waitLines(t, "tick", strings.Count(f.stdout.String(), "tick")+5)
	}
	mustFlyctl(t, e.Getenv, "stop", id)
	if err := f.wait(t); err != nil {
		t.Fatalf("the follow = %v, want nil\nstderr:\n%s", err, f.stderr.String())
	}
	followed := checkFollowed(t, f.stdout.String(), "stopped")
	if n := strings.Count(f.stderr.String(), "reconnecting"); n < 2 {
		t.Errorf("stderr = %q, want a reconnect note per drop", f.stderr.String())
	}

	// Exactly the log from the first followed line on.
	first := int(jsonLines(t, f.stdout.String())[0]["seq"].(float64))
	want := map[int]string{}
	for _, l := range jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "all", "-o", "json")) {
		if seq := int(l["seq"].(float64)); seq >= first {
			want[seq] = fmt.Sprint(l["text"])
		}
	}
	if len(followed) != len(want) {
		t.Errorf("followed %d lines, the log has %d from seq %d on", len(followed), len(want), first)
	}
	for seq, text := range want {
		if followed[seq] != text {
			t.Errorf("seq %d: followed %q, want %q", seq, followed[seq], text)
		}
	}
}

// TestFollowAcrossFlydRestart: flyd restarts (SIGTERM, as a service
// manager does) while a run is followed. The run lives on under its
// holder, the follow goes on from the next flyd with every line once,
// and it ends with "stopped" when the run is stopped.
func TestFollowAcrossFlydRestart(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flyd := flytest.StartFlyd(t, e)
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)

	cs.Close() // else its shim starts a flyd of its own as this one goes
	f := startFollow(t, e.Getenv, id, "-f", "-o", "json")
	f.waitLines(t, "tick", 5)
	flyd.Stop(t)
	flytest.StartFlyd(t, e)
	f.waitLines(t, "tick", strings.Count(f.stdout.String(), "tick")+5) // from the next flyd
	if out, errs, code := flyctl(t, e.Getenv, "stop", id); code != 0 {
		t.Fatalf("flyctl stop %s after the restart: exit %d\n%s%s", id, code, out, errs)
	}
	if err := f.wait(t); err != nil {
		t.Fatalf("the follow = %v, want nil\nstderr:\n%s", err, f.stderr.String())
	}
	checkFollowed(t, f.stdout.String(), "stopped")
}

// TestExitStatus: --exit-status turns a crashed run into exit 1, with -f
// and without; without it the exit is 0.
func TestExitStatus(t *testing.T) {
	e := flytest.NewEnv(t)
	// It crashes after 3 s: well after flutter_run has answered, even on
	// a loaded machine.
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20", fakeflutter.EnvCrashAfter+"=150")
	flytest.StartFlyd(t, e)
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)

	out, errs, code := flyctl(t, e.Getenv, "logs", "tail", id, "-f", "--exit-status")
	want := fmt.Sprintf("-- run %s exited: crashed (exit code %d) --\n", id, fakeflutter.CrashExitCode)
	if code != 1 || !strings.HasSuffix(out, want) || !strings.Contains(errs, "exit code 255") {
		t.Errorf("logs tail -f --exit-status of a crashing run: exit %d, stdout ends %q, stderr %q; want 1, %q", code, lastLine(out), errs, want)
	}
	if !strings.Contains(out, "Lost connection to device.") {
		t.Errorf("the followed log lacks the crash:\n%s", out)
	}
	if _, _, code := flyctl(t, e.Getenv, "logs", "tail", id, "-f"); code != 0 {
		t.Errorf("logs tail -f of a crashed run exits %d, want 0 without --exit-status", code)
	}
	if _, _, code := flyctl(t, e.Getenv, "logs", "tail", id, "--exit-status"); code != 1 {
		t.Errorf("logs tail --exit-status (no -f) of a crashed run exits %d, want 1", code)
	}
	if _, _, code := flyctl(t, e.Getenv, "logs", "tail", id); code != 0 {
		t.Errorf("logs tail of a crashed run exits %d, want 0", code)
	}
	// flyctl runs says it crashed (its app had started), not "failed".
	if out := mustFlyctl(t, e.Getenv, "runs", "--all"); !regexp.MustCompile(`(?m)^` + id + `\s+run\s+crashed\s+255\s`).MatchString(out) {
		t.Errorf("flyctl runs --all =\n%s\nwant run %s crashed, exit 255", out, id)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestCursorFile: a second call with the same --cursor-file prints only
// the lines that came after the first one's last.
func TestCursorFile(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	flytest.StartFlyd(t, e)
	cs, _ := mcpSession(t, e, flutterProject(t))
	id := startRun(t, cs)
	waitLog(t, e.Getenv, id, "3 ticks", func(l []map[string]any) bool { return countTicks(l) >= 3 })
	cursor := filepath.Join(t.TempDir(), "cursor")

	first := jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-o", "json", "-n", "3", "--cursor-file", cursor))
	if len(first) != 3 {
		t.Fatalf("first call printed %d lines, want 3", len(first))
	}
	b, err := os.ReadFile(cursor)
	if want := first[2]["cursor"].(string) + "\n"; err != nil || string(b) != want {
		t.Fatalf("cursor file = %q (%v), want %q", b, err, want)
	}
	lastSeq := int(first[2]["seq"].(float64))
	waitLog(t, e.Getenv, id, "newer lines", func(l []map[string]any) bool { return int(l[len(l)-1]["seq"].(float64)) > lastSeq+3 })

	// The cursor names the run: no RUN needed.
	second := jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", "-o", "json", "--cursor-file", cursor))
	if len(second) < 3 || int(second[0]["seq"].(float64)) != lastSeq+1 {
		t.Fatalf("second call = %v, want every line after seq %d", second, lastSeq)
	}
	for i := 1; i < len(second); i++ {
		if int(second[i]["seq"].(float64)) != int(second[i-1]["seq"].(float64))+1 {
			t.Errorf("second call skipped from seq %v to %v", second[i-1]["seq"], second[i]["seq"])
		}
	}
	b, _ = os.ReadFile(cursor)
	if want := second[len(second)-1]["cursor"].(string) + "\n"; string(b) != want {
		t.Errorf("cursor file after the second call = %q, want %q", b, want)
	}

	// A follow stopped with Ctrl-C (its context cancelled) stores its
	// cursor too.
	ctx, cancel := context.WithCancel(context.Background())
	var out flytest.Buffer
	done := make(chan error, 1)
	go func() { // owned by this test: waited for below
		done <- run(ctx, []string{"logs", "tail", "--cursor-file", cursor, "-f", "-o", "json"}, e.Getenv, strings.NewReader(""), &out, &bytes.Buffer{})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(out.String(), "\n") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; exitCode(err, &bytes.Buffer{}) != 0 {
		t.Errorf("follow cancelled: %v, want exit 0", err)
	}
	lines := jsonLines(t, out.String())
	b, _ = os.ReadFile(cursor)
	if len(lines) < 3 || string(b) != lines[len(lines)-1]["cursor"].(string)+"\n" {
		t.Errorf("cursor file after Ctrl-C = %q, want the last printed cursor of %d lines", b, len(lines))
	}
	if int(lines[0]["seq"].(float64)) != int(second[len(second)-1]["seq"].(float64))+1 {
		t.Errorf("the follow started at seq %v, want the one after the second call's last", lines[0]["seq"])
	}

	// A cursor file that does not exist yet: the last 10 lines, as
	// without one.
	fresh := filepath.Join(t.TempDir(), "fresh")
	if got := jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-o", "json", "--cursor-file", fresh)); len(got) != 10 {
		t.Errorf("with a new cursor file: %d lines, want the last 10", len(got))
	}

	// A cursor of another run is not applied.
	os.WriteFile(cursor, []byte("01otherrun:5\n"), 0o644)
	out2, errs, code := flyctl(t, e.Getenv, "logs", "tail", id, "-n", "1", "--cursor-file", cursor)
	if code != 0 || strings.Count(out2, "\n") != 1 || !strings.Contains(errs, "is for run 01otherrun") {
		t.Errorf("a cursor of another run: exit %d, stdout %q, stderr %q; want 0, one line, a note", code, out2, errs)
	}
	os.WriteFile(cursor, []byte("garbage"), 0o644)
	if _, errs, code := flyctl(t, e.Getenv, "logs", "tail", id, "--cursor-file", cursor); code != 1 || !strings.Contains(errs, "not a cursor") {
		t.Errorf("a malformed cursor file: exit %d, stderr %q; want 1 and why", code, errs)
	}
}

// scriptedFlyd serves the runs routes from a script of log responses, to
// check what flyctl does with gaps, heartbeats, drops and failures.
type scriptedFlyd struct {
	mu      sync.Mutex
	queries []string
	replies []func(w http.ResponseWriter)
}

func (s *scriptedFlyd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
	if !strings.HasSuffix(r.URL.Path, "/logs") {
		json.NewEncoder(w).Encode(runInfo{RunID: "r1", Kind: "run", State: "running"})
		return
	}
	s.mu.Lock()
	s.queries = append(s.queries, r.URL.RawQuery)
	var reply func(http.ResponseWriter)
	if len(s.replies) > 0 {
		reply, s.replies = s.replies[0], s.replies[1:]
	}
	s.mu.Unlock()
	if reply == nil {
		http.Error(w, `{"error":"script ended"}`, http.StatusTeapot)
		return
	}
	reply(w)
}

// scriptLines answers with NDJSON; a last "drop" line aborts the connection
// instead of ending it.
func scriptLines(ls ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", wire.ContentNDJSON)
		for _, l := range ls {
			if l == "drop" {
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			}
			fmt.Fprintln(w, l)
		}
	}
}

func scriptEntry(seq int, text string) string {
	return fmt.Sprintf(`{"type":"entry","seq":%d,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":%q}`, seq, text)
}

func serveScript(t *testing.T, e *flytest.Env, s *scriptedFlyd) {
	t.Helper()
	os.MkdirAll(filepath.Dir(e.Paths.Socket), 0o700)
	ln, err := ipc.Listen(e.Paths.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(ln) // ended by Close in Cleanup
	t.Cleanup(func() { srv.Close() })
}

func TestTailScripted(t *testing.T) {
	script := func() *scriptedFlyd {
		return &scriptedFlyd{replies: []func(http.ResponseWriter){
			scriptLines(scriptEntry(1, "one"), scriptEntry(2, "two"),
				`{"type":"gap","seq":5,"time":"2025-01-02T15:04:06Z","lost":3,"resume":6,"text":"… 3 lines lost"}`,
				scriptEntry(6, "six"), `{"type":"end","state":"running","exit_code":null,"last_seq":6}`),
			scriptLines(`{"type":"heartbeat","time":"2025-01-02T15:04:07Z","last_seq":6}`, scriptEntry(7, "seven"), scriptEntry(8, "eight"), "drop"),
			func(w http.ResponseWriter) { http.Error(w, `{"error":"shutting down"}`, http.StatusServiceUnavailable) },
			scriptLines(scriptEntry(8, "eight again"), scriptEntry(9, "nine"), `{"type":"future","x":1}`,
				`{"type":"exit","state":"failed","exit_code":1,"error":"no device","last_seq":9}`),
		}}
	}

	e := flytest.NewEnv(t)
	s := script()
	serveScript(t, e, s)
	out, errs, code := flyctl(t, e.Getenv, "logs", "tail", "r1", "-f", "--exit-status")
	want := `stdout one
stdout two
-- 3 lines lost (no longer in flyd's log); resuming at seq 6 --
stdout six
stdout seven
stdout eight
stdout nine
-- run r1 exited: failed (exit code 1): no device --
`
	if out != want || code != 1 {
		t.Errorf("text follow: exit %d, stdout\n%s\nwant 1 and\n%s\nstderr:\n%s", code, out, want, errs)
	}
	if got, want := strings.Join(s.queries, " "), "after=0&tail=10 after=6&follow=1 after=8&follow=1 after=8&follow=1"; got != want {
		t.Errorf("queries = %s, want %s", got, want)
	}

	e = flytest.NewEnv(t)
	serveScript(t, e, script())
	out, _, code = flyctl(t, e.Getenv, "logs", "tail", "r1", "-f", "-o", "json")
	wantJSON := `{"type":"entry","seq":1,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"one","cursor":"r1:1"}
{"type":"entry","seq":2,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"two","cursor":"r1:2"}
{"type":"gap","seq":5,"time":"2025-01-02T15:04:06Z","lost":3,"resume":6,"text":"… 3 lines lost","cursor":"r1:5"}
{"type":"entry","seq":6,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"six","cursor":"r1:6"}
{"type":"entry","seq":7,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"seven","cursor":"r1:7"}
{"type":"entry","seq":8,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"eight","cursor":"r1:8"}
{"type":"entry","seq":9,"time":"2025-01-02T15:04:05.5Z","stream":"stdout","text":"nine","cursor":"r1:9"}
{"type":"exit","run_id":"r1","state":"failed","exit_code":1,"error":"no device","cursor":"r1:9"}
`
	if out != wantJSON || code != 0 {
		t.Errorf("json follow: exit %d, stdout\n%s\nwant 0 and\n%s", code, out, wantJSON)
	}

	// A 4xx while reconnecting is final.
	e = flytest.NewEnv(t)
	serveScript(t, e, &scriptedFlyd{replies: []func(http.ResponseWriter){
		scriptLines(`{"type":"end","state":"running","exit_code":null,"last_seq":4}`),
		scriptLines(scriptEntry(5, "five"), "drop"),
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no such run \"r1\"","hint":"list the runs with: flyctl runs --all"}`))
		},
	}})
	out, errs, code = flyctl(t, e.Getenv, "logs", "tail", "r1", "-f", "-n", "0")
	if out != "stdout five\n" || code != 1 || !strings.Contains(errs, `no such run "r1"; list the runs with: flyctl runs --all`) {
		t.Errorf("a 404 on reconnect: exit %d, stdout %q, stderr %q; want 1 after the line, with the hint", code, out, errs)
	}

	// Without -f, a dropped stream is an error, not a silent short log.
	e = flytest.NewEnv(t)
	serveScript(t, e, &scriptedFlyd{replies: []func(http.ResponseWriter){scriptLines(scriptEntry(1, "one"), "drop")}})
	if out, errs, code := flyctl(t, e.Getenv, "logs", "tail", "r1"); code != 1 || out != "stdout one\n" || !strings.Contains(errs, "dropped") {
		t.Errorf("a drop without -f: exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
}

func TestParseTimeArg(t *testing.T) {
	now := time.Date(2025, 3, 4, 10, 30, 0, 0, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"0s", now},
		{"2025-01-02T15:04:05Z", time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2025-01-02T15:04:05.25+02:00", time.Date(2025, 1, 2, 13, 4, 5, 250e6, time.UTC)},
		{"2025-01-02 15:04", time.Date(2025, 1, 2, 15, 4, 0, 0, now.Location())},
		{"2025-01-02", time.Date(2025, 1, 2, 0, 0, 0, 0, now.Location())},
		{"09:15", time.Date(2025, 3, 4, 9, 15, 0, 0, now.Location())},
		{"09:15:30", time.Date(2025, 3, 4, 9, 15, 30, 0, now.Location())},
	} {
		got, err := parseTimeArg(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseTimeArg(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "yesterday", "-5m", "10", "2025-13-01"} {
		if _, err := parseTimeArg(in, now); err == nil {
			t.Errorf("parseTimeArg(%q) = nil error, want one", in)
		}
	}
}

func TestParseCursor(t *testing.T) {
	for _, tc := range []struct {
		in    string
		run   string
		seq   uint64
		valid bool
	}{
		{"01jq3v6xk2:42\n", "01jq3v6xk2", 42, true},
		{"a:b:7", "a:b", 7, true},
		{"r:0", "r", 0, true},
		{":5", "", 0, false},
		{"r:", "", 0, false},
		{"r:-1", "", 0, false},
		{"nocolon", "", 0, false},
	} {
		run, seq, err := parseCursor(tc.in)
		if (err == nil) != tc.valid || run != tc.run || seq != tc.seq {
			t.Errorf("parseCursor(%q) = %q, %d, %v; want %q, %d, valid %v", tc.in, run, seq, err, tc.run, tc.seq, tc.valid)
		}
	}
	if run, seq, _ := parseCursor(formatCursor("abc", 9)); run != "abc" || seq != 9 {
		t.Errorf("parseCursor(formatCursor(abc, 9)) = %q, %d", run, seq)
	}
}

func TestWindow(t *testing.T) {
	e := func(seq uint64) logLine { return logLine{Type: wire.LogLineEntry, Seq: seq} }
	g := func(seq uint64) logLine { return logLine{Type: wire.LogLineGap, Seq: seq} }
	for _, tc := range []struct {
		n    int
		in   []logLine
		want []uint64
	}{
		{2, []logLine{e(1), e(2), e(3)}, []uint64{2, 3}},
		{2, []logLine{g(1), e(2)}, []uint64{1, 2}},             // nothing dropped: the gap concerns shown lines
		{2, []logLine{e(1), g(2), e(3), e(4)}, []uint64{3, 4}}, // the gap is before the window
		{2, []logLine{e(1), e(2), g(3), e(4)}, []uint64{2, 3, 4}},
		{0, []logLine{e(1), g(2)}, nil},
	} {
		w := &window{n: tc.n}
		for _, l := range tc.in {
			w.add(l)
		}
		var got []uint64
		for _, l := range w.lines() {
			got = append(got, l.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("window(n=%d) of %v = %v, want %v", tc.n, tc.in, got, tc.want)
		}
	}
}

func TestTailColour(t *testing.T) {
	var b bytes.Buffer
	tl := &tailer{o: &tailOptions{output: "text"}, runID: "r", out: bufio.NewWriter(&b), color: true}
	tl.print(logLine{Type: wire.LogLineEntry, Seq: 1, Stream: "stderr", Text: "boom", Truncated: true})
	tl.print(logLine{Type: wire.LogLineEntry, Seq: 2, Stream: "stdout", Text: "ok"})
	tl.print(logLine{Type: wire.LogLineGap, Seq: 3, Lost: 1, Resume: 4})
	tl.out.Flush()
	want := "\x1b[31mstderr\x1b[0m boom [truncated]\nstdout ok\n\x1b[33m-- 1 line lost (no longer in flyd's log); resuming at seq 4 --\x1b[0m\n"
	if b.String() != want {
		t.Errorf("coloured output = %q, want %q", b.String(), want)
	}
	if isTerminal(&b) {
		t.Errorf("isTerminal(a buffer) = true")
	}
}

// TestLogsTailHelpStreams: logs tail --help names every stream a run's
// log has, each with what it holds, and colours each on a terminal.
func TestLogsTailHelpStreams(t *testing.T) {
	for _, s := range []logring.Stream{logring.Stdout, logring.Stderr, logring.Error, logring.Event, logring.Fly} {
		if !strings.Contains(logsTailAbout, "\n  "+string(s)+" ") {
			t.Errorf("logs tail --help does not explain the stream %q:\n%s", s, logsTailAbout)
		}
		if _, ok := streamColor[string(s)]; !ok {
			t.Errorf("the stream %q has no colour", s)
		}
	}
}
