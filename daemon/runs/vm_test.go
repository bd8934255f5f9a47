package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// TestRunFollowsVMServiceErrors: the framework errors a debug run posts
// on its VM service (never printed under --machine) reach the run's log
// as error entries and its error list, deduplicated and located in the
// project; a hot reload starts a new generation.
func TestRunFollowsVMServiceErrors(t *testing.T) {
	e := newEngine(t)
	r := startApp(t, e, fakeflutter.EnvErrorsAtStart, strings.Repeat("overflow,", 199)+"overflow", fakeflutter.EnvErrorsOnReload, "build")
	flytest.Eventually(t, "200 errors counted", func() bool { return r.Errors().Stats().Total == 200 })
	p := r.Errors().Read(0, false, 4<<10)
	if len(p.Entries) != 1 || p.Entries[0].Count != 200 || p.Entries[0].Location != "lib/main.dart:30:12" || p.Entries[0].Widget != "Row" {
		t.Fatalf("errors = %q, want one overflow counted 200 at lib/main.dart:30:12", p.Text)
	}
	n := 0
	for _, en := range r.Ring().Tail(r.Ring().Len()) {
		if en.Stream == logring.Error {
			n++
		}
	}
	if n != 200 {
		t.Errorf("%d error entries in the log, want 200", n)
	}
	o, err := r.Restart(context.Background(), false, Act{By: store.Actor{Session: "s1", Client: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	// The error the reload caused is in its outcome: the fake draws a
	// frame after it, which ends the settle window.
	if !o.Applied() || o.Settled != "first frame" || len(o.Errors) != 1 || !strings.Contains(o.ErrorsText, "Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13") {
		t.Errorf("reload outcome = %+v, want applied with the build exception", o)
	}
	if st := r.Errors().Stats(); st.Current != 1 || st.Generation != 1 {
		t.Errorf("after the reload: %+v", st)
	}
	// The connection follows the UI isolate across a hot restart, and
	// knows flutter_tools' reload services.
	before := r.Isolate()
	if m := r.ServiceMethod("reloadSources"); before == "" || m != "s0.reloadSources" {
		t.Errorf("isolate %q, reloadSources by %q; want an isolate and s0.reloadSources", before, m)
	}
	if o, err := r.Restart(context.Background(), true, Act{By: store.Actor{Session: "s1", Client: "test"}}); err != nil || len(o.Errors) != 1 {
		t.Fatalf("hot restart = %+v, %v; want the build exception again", o, err)
	}
	flytest.Eventually(t, "the new isolate", func() bool { return r.Isolate() != "" && r.Isolate() != before })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

var (
	alice = Act{By: store.Actor{Session: "aaaaaaaa", Client: "claude-code"}}
	bob   = Act{By: store.Actor{Session: "bbbbbbbb", Client: "cursor"}}
)

// TestReloadOutcomes: a hot reload says whether it applied: a rejected
// one says a restart is needed, a compile error comes with flutter's
// output, a clean one has no new errors; each is in the journal.
func TestReloadOutcomes(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()

	r := startApp(t, e, fakeflutter.EnvReloadReject, "1", fakeflutter.EnvTickMS, "0")
	o, err := r.Restart(ctx, false, alice)
	if err != nil || o.Applied() || !o.Rejected || !strings.Contains(o.Message, "Reload rejected") || o.Summary() != "rejected: a hot restart is needed" {
		t.Errorf("a rejected reload = %+v, %v", o, err)
	}
	if o, err := r.Restart(ctx, true, alice); err != nil || !o.Applied() || len(o.Errors) != 0 || o.Summary() != "applied, no new errors" {
		t.Errorf("the restart after it = %+v, %v", o, err)
	}
	acts, _ := r.ActionsSince(0)
	if len(acts) != 2 || acts[0].What != "hot reload" || acts[0].Outcome != "rejected: a hot restart is needed" || acts[1].What != "hot restart" {
		t.Errorf("journal = %+v", acts)
	}
	if la := r.Record().LastAction; la == nil || la.What != "hot restart" || la.By.Client != "claude-code" {
		t.Errorf("last action = %+v", la)
	}

	r = startApp(t, e, fakeflutter.EnvReloadFail, "1", fakeflutter.EnvTickMS, "0")
	o, err = r.Restart(ctx, false, alice)
	if err != nil || o.Applied() || o.Rejected || len(o.Stderr) == 0 || !strings.Contains(o.Stderr[0], "lib/main.dart:12:3: Error: Expected ';' after this.") {
		t.Errorf("a reload that does not compile = %+v, %v", o, err)
	}
}

// TestReloadsCoalesce: reloads asked at once by several clients are one
// reload after the one in flight, and each caller gets its outcome with
// the others named.
func TestReloadsCoalesce(t *testing.T) {
	e := newEngine(t)
	r := startApp(t, e, fakeflutter.EnvTickMS, "0")
	const n = 6
	outs := make([]Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		act := Act{By: store.Actor{Session: fmt.Sprintf("s%d", i), Client: "agent"}}
		wg.Go(func() { outs[i], errs[i] = r.Restart(context.Background(), false, act) })
	}
	wg.Wait()
	// However they interleave, every caller's outcome is a reload that
	// ran, shared by the callers it names: a reload shared by k callers
	// is counted 1/k by each, so the reloads flutter did are the sum.
	batches := 0.0
	for i := range n {
		if errs[i] != nil || !outs[i].Applied() {
			t.Fatalf("caller %d: %+v, %v", i, outs[i], errs[i])
		}
		batches += 1 / float64(len(outs[i].Shared)+1)
	}
	if reloads := strings.Count(strings.Join(r.Tail(r.Ring().Len()), "\n"), "Reloaded 1 of 812 libraries in"); float64(reloads) < batches-0.01 || float64(reloads) > batches+0.01 {
		t.Errorf("flutter reloaded %d times; the outcomes account for %.2f reloads", reloads, batches)
	}
	acts, _ := r.ActionsSince(0)
	if len(acts) != n {
		t.Errorf("%d actions in the journal, want one per caller (%d)", len(acts), n)
	}
}

// TestClaims: while a session holds a claim, another's reload and stop
// are refused with the holder's name and note; force overrides and is
// recorded; the claim ends with its session.
func TestClaims(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	r := startApp(t, e, fakeflutter.EnvTickMS, "0")
	if _, err := r.Claim(bob, "  profiling the list\nscreen ", 0); err != nil {
		t.Fatal(err)
	}
	_, err := r.Restart(ctx, false, alice)
	var ce *ClaimedError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"cursor" #bbbbbb`) || !strings.Contains(err.Error(), `"profiling the list screen"`) ||
		!strings.Contains(err.Error(), "force") {
		t.Errorf("a reload under another's claim = %v", err)
	}
	if err := r.StopAs(ctx, alice); !errors.As(err, &ce) {
		t.Errorf("a stop under another's claim = %v", err)
	}
	if _, err := r.Claim(alice, "mine now", time.Minute); !errors.As(err, &ce) {
		t.Errorf("claiming a claimed run = %v", err)
	}
	if _, err := r.Restart(ctx, false, bob); err != nil {
		t.Errorf("the holder's own reload = %v", err)
	}
	if o, err := r.Restart(ctx, false, Act{By: alice.By, Force: true}); err != nil || !o.Applied() {
		t.Errorf("a forced reload = %+v, %v", o, err)
	}
	if la := r.Record().LastAction; la == nil || !la.Forced || la.By.Session != alice.By.Session {
		t.Errorf("the forced reload's record = %+v", la)
	}
	if c, ok := r.CurrentClaim(); !ok || c.By != bob.By || time.Until(c.Until) < 14*time.Minute {
		t.Errorf("claim = %+v, %v; want bob's for the default 15 minutes", c, ok)
	}
	e.ReleaseClaims(bob.By.Session)
	if _, ok := r.CurrentClaim(); ok {
		t.Error("the claim outlived its session")
	}
	if _, err := r.Restart(ctx, false, alice); err != nil {
		t.Errorf("a reload after the claim ended = %v", err)
	}
}

// TestWebErrorsFromText: on the web, structured errors are off and the
// app prints the blocks in app.log: they become the same entries.
func TestWebErrorsFromText(t *testing.T) {
	e := newEngine(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Start(context.Background(), Spec{Kind: store.KindRun, Root: root,
		Env:  fakeEnv(fakeflutter.EnvErrorsAtStart, "overflow,overflow,overflow", fakeflutter.EnvTickMS, "0"),
		Args: []string{"run", "--machine", "-d", "chrome"}})
	if err != nil {
		t.Fatal(err)
	}
	flytest.Eventually(t, "3 errors from text", func() bool { return r.Errors().Stats().Total == 3 })
	p := r.Errors().Read(0, false, 4<<10)
	if len(p.Entries) != 1 || p.Entries[0].Count != 3 || p.Entries[0].Location != "lib/main.dart:30:12" || p.Entries[0].Library != "rendering library" {
		t.Errorf("web errors = %q", p.Text)
	}
}

// hostileVM is a VM service that answers the calls a run makes, then on
// its first connection sends garbage, a flood of 100k errors and a 50 MB
// message; later connections are refused.
func hostileVM(t *testing.T) (uri string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conns.Add(1) > 1 {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		answer := func(id json.RawMessage, result string) error {
			return c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(id)+`,"result":`+result+`}`))
		}
		for listens := 0; listens < len(vmStreams); { // getVM, then a streamListen per stream
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			json.Unmarshal(data, &req)
			if req.Method == "streamListen" {
				listens++
			}
			if answer(req.ID, `{"type":"Success","isolates":[{"id":"isolates/1","name":"main"}]}`) != nil {
				return
			}
		}
		for _, junk := range []string{"not json", `{"jsonrpc":"2.0","method":"streamNotify","params":7}`, `[1,2,3]`, "\xff\xfe"} {
			c.Write(ctx, websocket.MessageText, []byte(junk))
		}
		c.Write(ctx, websocket.MessageBinary, []byte{0, 1, 2})
		flood := []byte(`{"jsonrpc":"2.0","method":"streamNotify","params":{"streamId":"Extension","event":{"kind":"Extension","extensionKind":"Flutter.Error","timestamp":1,` +
			`"extensionData":{"description":"Exception caught by widgets library","properties":[{"type":"ErrorSummary","description":"flood"}]}}}}`)
		for range 100_000 {
			if c.Write(ctx, websocket.MessageText, flood) != nil {
				return
			}
		}
		big := make([]byte, 50<<20)
		for i := range big {
			big[i] = 'x'
		}
		c.Write(ctx, websocket.MessageText, big)
		c.Read(ctx) // until flyd hangs up
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/AbCdEf12345=/ws", conns
}

// TestHostileVMService: a VM service that is not on loopback is refused;
// one that sends garbage, 100k events in a burst and a 50 MB message is
// cut down to its bounds and dropped, and then gone; the run it belongs
// to goes on printing, and its goroutines and memory go back to where
// they were when it ends (the package's goleak check).
func TestHostileVMService(t *testing.T) {
	t.Parallel() // it waits on a flood: overlap the others
	e := newEngine(t)
	r := startApp(t, e, fakeflutter.EnvTickMS, "20")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	r.followVM("ws://10.1.2.3:8181/AbCdEf12345=/ws")
	flytest.WaitLine(t, r.Ring(), "not following the app's VM service")

	uri, conns := hostileVM(t)
	r.followVM(uri)
	flytest.Eventually(t, "the follower to try again after the 50 MB message", func() bool { return conns.Load() >= 2 })
	if st := r.Errors().Stats(); st.Total > 5000 || st.Entries > 2 {
		t.Errorf("after a flood of 100k errors the list holds %+v, want it cut to the rate", st)
	}
	seq := r.Ring().Last()
	flytest.Eventually(t, "the app to go on printing", func() bool { return r.Ring().Last() > seq+3 })
	if !r.Live() {
		t.Fatal("the run ended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Errorf("the heap grew by %d MB and stayed", grew>>20)
	}
}
