package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/runs"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// apiServer is the API over a runs engine with a store and the fake
// flutter, served over HTTP as the daemon serves it.
type apiServer struct {
	api  *API
	runs *runs.Engine
	db   *store.DB
	url  string
	c    *http.Client
	root string // a Flutter project, symlinks resolved (a workspace key)
}

// serverConfig is what a test changes of the engine and the API.
type serverConfig struct {
	RingEntries  int
	WriteTimeout time.Duration
	Heartbeat    time.Duration
}

// newAPIServer starts the API for cfg (its Flutter is the fake) with a
// store opened with opts. With unix set it listens on a Unix socket, as
// flyd does, whose small buffers make a stalled reader stall quickly;
// else on loopback TCP. Cleanup stops every run, then the server.
func newAPIServer(t testing.TB, cfg serverConfig, opts store.Options, unix bool) *apiServer {
	t.Helper()
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	a := &apiServer{}
	a.runs = runs.New(runs.Config{Flutter: flutter, StopGrace: 5 * time.Second, RingEntries: cfg.RingEntries, RingBytes: 100 << 10}, log,
		func(r *runs.Run) { a.api.RunChanged(r) })
	a.api = New(Config{Runs: a.runs, Status: func() wire.Status { return wire.Status{} }, WriteTimeout: cfg.WriteTimeout, Heartbeat: cfg.Heartbeat, Log: log})
	db, err := store.Open(filepath.Join(t.TempDir(), "fly.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	a.db = db
	if err := a.runs.Open(db, ""); err != nil {
		t.Fatal(err)
	}
	ctx, stopWriter := context.WithCancel(context.Background())
	written := make(chan struct{})
	go func() { // owned by the cleanup below
		defer close(written)
		_ = db.Run(ctx)
	}()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	flytest.WriteTree(t, root, map[string]string{
		"pubspec.yaml":  "name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	})
	a.root = root
	mux := http.NewServeMux()
	a.api.Register(mux)
	hs := httptest.NewUnstartedServer(Headers(mux))
	if unix {
		dir, err := os.MkdirTemp("", "flyapi") // short: socket paths are capped
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		hs.Listener.Close()
		hs.Listener = ln
		hs.Start()
		a.url = "http://flyd"
		a.c = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	} else {
		hs.Start()
		a.url, a.c = hs.URL, hs.Client()
	}
	t.Cleanup(func() {
		a.runs.Close() // ends every follow with its exit line
		hs.CloseClientConnections()
		hs.Close()
		a.api.Close()
		stopWriter()
		<-written
		db.Close()
	})
	return a
}

// start runs `flutter run --machine` in the project, steered by vars
// ("FAKE_FLUTTER_X=v"), and waits until the app has started unless the
// fake delays its start.
func (a *apiServer) start(t testing.TB, vars ...string) *runs.Run {
	t.Helper()
	env := map[string]string{"FLY_TEST_HELPER": "flutter"}
	for _, v := range os.Environ() {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	r, err := a.runs.Start(context.Background(), runs.Spec{Kind: store.KindRun, Root: a.root, Env: env, Args: []string{"run", "--machine"}})
	if err != nil {
		t.Fatal(err)
	}
	if env[fakeflutter.EnvStartupMS] != "" {
		return r
	}
	select {
	case <-r.Started():
	case <-time.After(30 * time.Second):
		t.Fatalf("run %s did not start within 30s", r.ID())
	}
	if st := r.Record().State; st != store.StateRunning {
		t.Fatalf("run %s: state %s, want running\n%s", r.ID(), st, tail(r, 30))
	}
	return r
}

// do sends a request and returns the response, whose body the caller closes.
func (a *apiServer) do(t testing.TB, method, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// getJSON does method path, checks the status and decodes the reply.
func (a *apiServer) getJSON(t testing.TB, method, path string, wantCode int, out any) {
	t.Helper()
	resp := a.do(t, method, path)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("%s %s = %s %s, want %d", method, path, resp.Status, body, wantCode)
	}
	if resp.Header.Get(wire.HeaderVersion) == "" {
		t.Errorf("%s %s: no %s header", method, path, wire.HeaderVersion)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: decode %s: %v", method, path, body, err)
	}
}

// ndLine is any line of a log stream, decoded.
type ndLine = wire.LogLine

// logs reads a whole non-follow log stream.
func (a *apiServer) logs(t testing.TB, id, query string) []ndLine {
	t.Helper()
	resp := a.do(t, "GET", "/v1/runs/"+id+"/logs?"+query)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("logs?%s = %s %s", query, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentNDJSON {
		t.Errorf("logs?%s: Content-Type %q, want %s", query, ct, wire.ContentNDJSON)
	}
	lines, err := decodeLines(resp.Body, nil)
	if err != nil {
		t.Fatalf("logs?%s: %v", query, err)
	}
	return lines
}

// decodeLines decodes NDJSON lines until EOF or an error, sending each to
// each if it is not nil.
func decodeLines(r io.Reader, each chan<- ndLine) ([]ndLine, error) {
	br := bufio.NewReader(r)
	var out []ndLine
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			if b[len(b)-1] != '\n' {
				return out, fmt.Errorf("line without newline: %q (%v)", b, err)
			}
			var l ndLine
			if jerr := json.Unmarshal(b, &l); jerr != nil {
				return out, fmt.Errorf("bad line %q: %v", b, jerr)
			}
			out = append(out, l)
			if each != nil {
				each <- l
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

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

func lastLine(ls []ndLine) ndLine {
	if len(ls) == 0 {
		return ndLine{}
	}
	return ls[len(ls)-1]
}

// checkContiguous checks that entries and gaps account for every seq
// after after, in order, and returns the last seq.
func checkContiguous(t testing.TB, lines []ndLine, after uint64) uint64 {
	t.Helper()
	cur := after
	for i, l := range lines {
		switch l.Type {
		case wire.LogLineEntry:
			if l.Seq != cur+1 {
				t.Fatalf("line %d: entry seq %d after seq %d, want %d", i, l.Seq, cur, cur+1)
			}
		case wire.LogLineGap:
			if l.Resume != cur+l.Lost+1 || l.Seq != l.Resume-1 || l.Lost == 0 {
				t.Fatalf("line %d: gap %+v after seq %d does not account for the missing seqs", i, l, cur)
			}
		default:
			continue
		}
		cur = l.Seq
	}
	return cur
}

func entryTexts(lines []ndLine) []string {
	var out []string
	for _, l := range lines {
		if l.Type == wire.LogLineEntry {
			out = append(out, l.Text)
		}
	}
	return out
}

func TestHTTPRunsListGetStop(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=0")

	var list runsReply
	a.getJSON(t, "GET", "/v1/runs", 200, &list)
	if len(list.Runs) != 1 || list.Runs[0].RunID != r.ID() || list.Runs[0].State != "running" {
		t.Fatalf("GET /v1/runs = %+v, want run %s running", list.Runs, r.ID())
	}
	for _, q := range []string{"?all=1", "?root=" + url.QueryEscape(a.root), "?all=true&root=" + url.QueryEscape(a.root)} {
		var l runsReply
		a.getJSON(t, "GET", "/v1/runs"+q, 200, &l)
		if len(l.Runs) != 1 || l.Runs[0].RunID != r.ID() {
			t.Errorf("GET /v1/runs%s = %+v, want run %s", q, l.Runs, r.ID())
		}
	}
	var other runsReply
	a.getJSON(t, "GET", "/v1/runs?root="+url.QueryEscape(t.TempDir()), 200, &other)
	if other.Runs == nil || len(other.Runs) != 0 {
		t.Errorf("runs of another root = %#v, want an empty list", other.Runs)
	}
	for _, q := range []string{"?root=relative/dir", "?all=maybe", "?workspace=/x", "?all=1&all=0"} {
		var e errorReply
		a.getJSON(t, "GET", "/v1/runs"+q, 400, &e)
		if e.Error == "" {
			t.Errorf("GET /v1/runs%s: no error message", q)
		}
	}

	var info wire.Run
	a.getJSON(t, "GET", "/v1/runs/"+r.ID(), 200, &info)
	if info.RunID != r.ID() || info.State != "running" || info.LogURI != "logs://run/"+r.ID() || info.Root != a.root || info.PID == 0 || info.AppID == "" {
		t.Errorf("GET /v1/runs/%s = %+v", r.ID(), info)
	}
	var nf errorReply
	a.getJSON(t, "GET", "/v1/runs/nosuchrun", 404, &nf)
	if !strings.Contains(nf.Error, `no such run "nosuchrun"`) || !strings.Contains(nf.Hint, "flyctl runs") {
		t.Errorf("unknown run = %+v, want an error naming it and a hint", nf)
	}
	a.getJSON(t, "POST", "/v1/runs/nosuchrun/stop", 404, &nf)
	a.getJSON(t, "GET", "/v1/runs/nosuchrun/logs", 404, &nf)

	resp := a.do(t, "GET", "/v1/runs/"+r.ID()+"/stop")
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET .../stop = %s, want 405", resp.Status)
	}

	var stopped wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &stopped)
	if stopped.State != "stopped" || stopped.ExitCode == nil || stopped.EndedAt.IsZero() {
		t.Errorf("POST stop = %+v, want stopped with an exit code and an end time", stopped)
	}
	var again wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &again)
	if !reflect.DeepEqual(stopped, again) {
		t.Errorf("stopping a stopped run changed it: %+v %+v %+v, then %+v %+v %+v", stopped, stopped.LastAction, stopped.Errors, again, again.LastAction, again.Errors)
	}
	a.getJSON(t, "GET", "/v1/runs/"+r.ID(), 200, &info)
	if info.State != "stopped" {
		t.Errorf("GET after stop: state %s, want stopped", info.State)
	}
}

func TestParseLogsParams(t *testing.T) {
	tests := []struct {
		query string
		want  logsParams
		err   string
	}{
		{"", logsParams{}, ""},
		{"after=42", logsParams{after: 42}, ""},
		{"tail=10", logsParams{tail: 10, hasTail: true}, ""},
		{"tail=0", logsParams{hasTail: true}, ""},
		{"follow=1&after=7&tail=3", logsParams{after: 7, tail: 3, hasTail: true, follow: true}, ""},
		{"follow=false", logsParams{}, ""},
		{"after=-1", logsParams{}, `after="-1" is not a seq`},
		{"after=x", logsParams{}, `after="x" is not a seq`},
		{"tail=-5", logsParams{}, `tail="-5" is not a number of lines`},
		{"tail=99999999999", logsParams{}, `tail="99999999999" is not a number of lines`},
		{"follow=perhaps", logsParams{}, `follow="perhaps" is not a boolean`},
		{"since=3", logsParams{}, `unknown query parameter "since"`},
		{"after=1&after=2", logsParams{}, `"after" is given 2 times`},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := parseLogsParams(q)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseLogsParams(%q) error = %v, want %q", tt.query, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("parseLogsParams(%q) error = %v", tt.query, err)
		case tt.err == "" && got != tt.want:
			t.Errorf("parseLogsParams(%q) = %+v, want %+v", tt.query, got, tt.want)
		}
	}
}

func TestHTTPRunsLogs(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvLines+"=20", fakeflutter.EnvTickMS+"=1")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 20")
	last := r.Ring().Last()

	all := a.logs(t, r.ID(), "")
	end := all[len(all)-1]
	if end.Type != wire.LogLineEnd || end.State != "running" || end.ExitCode != nil || end.LastSeq != last {
		t.Errorf("last line = %+v, want end of a running run at seq %d", end, last)
	}
	if got := checkContiguous(t, all[:len(all)-1], 0); got != last {
		t.Errorf("entries end at seq %d, want %d", got, last)
	}
	texts := entryTexts(all)
	if !strings.HasPrefix(texts[0], "started: flutter run --machine") || !contains(texts, "flutter: tick 1") || !contains(texts, "flutter: tick 20") {
		t.Errorf("entries %q lack the start note or the ticks", texts)
	}
	for _, l := range all[:len(all)-1] {
		if l.Time.IsZero() || l.Stream == "" {
			t.Errorf("entry %+v lacks time or stream", l)
		}
	}

	tests := []struct {
		query      string
		first, end uint64 // seqs of the first and last entry; 0, 0 for none
	}{
		{"after=5", 6, last},
		{"tail=5", last - 4, last},
		{"after=" + strconv.FormatUint(last-3, 10) + "&tail=10", last - 2, last}, // tail applies after after
		{"after=2&tail=3", last - 2, last},
		{"tail=0", 0, 0},
		{"after=" + strconv.FormatUint(last, 10), 0, 0},
		{"after=999999&follow=0", 0, 0}, // a cursor past the end starts at the end
		{"tail=100000", 1, last},
	}
	for _, tt := range tests {
		lines := a.logs(t, r.ID(), tt.query)
		entries := lines[:len(lines)-1]
		end := lines[len(lines)-1]
		if end.Type != wire.LogLineEnd {
			t.Errorf("logs?%s: last line %+v, want end", tt.query, end)
		}
		if tt.first == 0 {
			if len(entries) != 0 || end.LastSeq != last {
				t.Errorf("logs?%s = %+v, want only an end line with the cursor", tt.query, lines)
			}
			continue
		}
		if len(entries) == 0 || entries[0].Seq != tt.first || end.LastSeq != tt.end {
			t.Errorf("logs?%s: first entry %+v, end %+v; want entries %d..%d", tt.query, lastLine(entries[:min(1, len(entries))]), end, tt.first, tt.end)
			continue
		}
		checkContiguous(t, entries, tt.first-1)
	}

	for _, q := range []string{"after=-1", "tail=x", "follow=maybe", "since=3"} {
		var e errorReply
		a.getJSON(t, "GET", "/v1/runs/"+r.ID()+"/logs?"+q, 400, &e)
		if e.Error == "" {
			t.Errorf("logs?%s: no error message", q)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
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
	a := newAPIServer(t, serverConfig{WriteTimeout: time.Second}, store.Options{}, true)
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

// TestHTTPRunsVersionHeader: log streams carry the version header too.
func TestHTTPRunsVersionHeader(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=0")
	resp := a.do(t, "GET", "/v1/runs/"+r.ID()+"/logs")
	defer resp.Body.Close()
	if v := resp.Header.Get(wire.HeaderVersion); v != wire.VersionHeader() {
		t.Errorf("%s = %q, want %q", wire.HeaderVersion, v, wire.VersionHeader())
	}
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

// tail is the last n entries of r's log, for failure messages.
func tail(r *runs.Run, n int) string {
	var b strings.Builder
	for _, e := range r.Ring().Tail(n) {
		b.WriteString(e.Text + "\n")
	}
	return b.String()
}
