package shim

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// initialize is a client's first request, as an editor sends it.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// handshake initializes a session through h, as a client does.
func handshake(t *testing.T, h *harness) {
	t.Helper()
	h.send(initialize)
	if r := h.readReply(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("reply to initialize = %s, want a result", r.raw)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// methods lists the methods of recs ("" for responses).
func methods(recs []peerRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.method)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReconnectReplays: flyd goes away mid-session and comes back. The
// request in flight gets the restart error; the new session sees the
// client's initialize (under a fresh id, its reply swallowed),
// initialized and its live subscriptions, in order, then the request the
// client sent during the outage.
func TestReconnectReplays(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	handshake(t, h)
	for _, req := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"workspace:///a.dart"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"workspace:///b.dart"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"bad:gone"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"workspace:///b.dart"}}`,
		`[{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"logs://run/1"}}]`,
	} {
		h.send(req)
		h.readLine()
	}
	h.send(`{"jsonrpc":"2.0","id":7,"method":"hang"}`)
	p.waitFor(t, "hang")

	p.down(t)
	r := h.readReply()
	if string(r.ID) != "7" || r.Error == nil || r.Error.Code != -32603 || !strings.HasPrefix(r.Error.Message, restartedMessage) {
		t.Errorf("reply to the request in flight = %s, want -32603 %q", r.raw, restartedMessage)
	}
	// Sent while nothing listens: queued until the reconnect.
	h.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call"}`)
	time.Sleep(150 * time.Millisecond)
	p.up(t, sock)

	// The next line is the queued request's reply: the replayed
	// initialize's never reaches stdout.
	if r := h.readReply(); string(r.ID) != "8" || string(r.Result) != `{"method":"tools/call"}` {
		t.Errorf("first reply after the reconnect = %s, want the result for id 8", r.raw)
	}
	second := p.records(2)
	want := []string{"initialize", "notifications/initialized", "resources/subscribe", "resources/subscribe", "tools/call"}
	if got := methods(second); !equal(got, want) {
		t.Fatalf("second session received %q, want %q", got, want)
	}
	if id := second[0].id; !strings.HasPrefix(id, `"`+replayIDPrefix) {
		t.Errorf("replayed initialize has id %s, want a fresh shim id", id)
	}
	if second[2].uri != "workspace:///a.dart" || second[3].uri != "logs://run/1" {
		t.Errorf("replayed subscriptions %q, %q; want workspace:///a.dart then logs://run/1", second[2].uri, second[3].uri)
	}

	// The session goes on as before.
	h.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if r := h.readReply(); string(r.ID) != "9" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 9", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestReconnectTwice: every reconnect replays the same session, and a
// subscription flyd refused on a replay is not tried again.
func TestReconnectTwice(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	handshake(t, h)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"workspace:///a.dart"}}`)
	h.readLine()
	for n := 2; n <= 3; n++ {
		h.send(`{"jsonrpc":"2.0","method":"drop"}`) // flyd closes the connection
		// A ping sent before the relay noticed gets the restart error:
		// send it again, as a client does.
		for {
			h.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
			r := h.readReply()
			if r.Error == nil {
				break
			}
			if !strings.HasPrefix(r.Error.Message, restartedMessage) {
				t.Fatalf("reply after reconnect %d = %s, want a result or the restart error", n-1, r.raw)
			}
		}
		want := []string{"initialize", "notifications/initialized", "resources/subscribe", "ping"}
		if got := methods(p.records(n)); !equal(got, want) {
			t.Fatalf("session %d received %q, want %q", n, got, want)
		}
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkGoroutines(t)
}

// TestReconnectInitializeInFlight: a connection lost before initialize
// was answered sends the client's initialize again under its own id, so
// the client gets its one reply.
func TestReconnectInitializeInFlight(t *testing.T) {
	p := newPeer()
	p.hangInit = true
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	h.send(initialize)
	p.waitFor(t, "initialize")
	p.dropAll()
	if r := h.readReply(); string(r.ID) != "1" || r.Error != nil || string(r.Result) != `{"method":"initialize"}` {
		t.Errorf("reply to initialize = %s, want its result from the second session", r.raw)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if r := h.readReply(); string(r.ID) != "2" {
		t.Errorf("reply = %s, want the result for id 2", r.raw)
	}
	if got, want := methods(p.records(2)), []string{"initialize", "notifications/initialized", "ping"}; !equal(got, want) {
		t.Errorf("second session received %q, want %q", got, want)
	}
	if id := p.records(2)[0].id; id != "1" {
		t.Errorf("second initialize has id %s, want the client's 1", id)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestReconnectGivesUp: when flyd does not come back in time, the
// requests queued meanwhile get an error and Run fails.
func TestReconnectGivesUp(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock, ReconnectTimeout: 500 * time.Millisecond})
	handshake(t, h)
	p.down(t)
	h.waitLog("lost the connection to flyd")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	r := h.readReply()
	if string(r.ID) != "2" || r.Error == nil || !strings.Contains(r.Error.Message, "flyd did not come back on "+endpointOf(t, sock)+" within 500ms") {
		t.Errorf("reply to the queued request = %s, want an error saying flyd did not come back", r.raw)
	}
	h.closeStdin()
	if err := h.wait(); err == nil || !strings.Contains(err.Error(), "did not come back") {
		t.Errorf("Run = %v, want a 'did not come back' error", err)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestReconnectVersionMismatch: a flyd that comes back speaking another
// protocol ends the reconnect at once, with the side to upgrade named in
// the reply to the client's waiting request.
func TestReconnectVersionMismatch(t *testing.T) {
	for _, tt := range []struct {
		name    string
		header  map[string][]string
		status  int
		wantErr string
	}{
		{"newer flyd", map[string][]string{wire.HeaderVersion: {"9.0.0 protocol=99"}}, 0, "upgrade flyctl"},
		{"412", nil, 412, "412 Precondition Failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPeer()
			sock := startPeer(t, p)
			h := startRelay(t, Config{Socket: sock})
			handshake(t, h)
			p.down(t)
			h.waitLog("lost the connection to flyd")
			h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			time.Sleep(100 * time.Millisecond)
			p.mu.Lock()
			p.header, p.status = tt.header, tt.status
			p.mu.Unlock()
			start := time.Now()
			p.up(t, sock)
			r := h.readReply()
			if string(r.ID) != "2" || r.Error == nil || !strings.Contains(r.Error.Message, tt.wantErr) {
				t.Errorf("reply = %s, want an error containing %q", r.raw, tt.wantErr)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the mismatch took %v to report, want no retrying", d)
			}
			h.closeStdin()
			if err := h.wait(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
			h.expectEOF()
			checkGoroutines(t)
		})
	}
}

// TestReconnectStdinEnds: a client that goes away during an outage,
// with nothing waiting for flyd, ends Run at once.
func TestReconnectStdinEnds(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	handshake(t, h)
	p.down(t)
	h.waitLog("lost the connection to flyd")
	start := time.Now()
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to end after stdin, want it at once", d)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestReconnectStdinEndsWithQueue: requests the client wrote before its
// stdin ended, during an outage, are still sent and answered.
func TestReconnectStdinEndsWithQueue(t *testing.T) {
	p := newPeer()
	sock := startPeer(t, p)
	h := startRelay(t, Config{Socket: sock})
	handshake(t, h)
	p.down(t)
	h.waitLog("lost the connection to flyd")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	h.closeStdin()
	time.Sleep(100 * time.Millisecond)
	p.up(t, sock)
	if r := h.readReply(); string(r.ID) != "2" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 2", r.raw)
	}
	if err := h.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	h.expectEOF()
	checkGoroutines(t)
}

// TestReconnectRestartsFlyd: when nothing answers after a loss, the relay
// starts flyd itself and the session goes on.
func TestReconnectRestartsFlyd(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "serve", sock, state)
	h := newHarness(t, Config{Socket: sock, StateDir: state, Flyd: flyd})
	h.relay.restartAfter = 100 * time.Millisecond
	h.start()
	handshake(t, h)
	killHelper(t, state)
	h.waitLog("lost the connection to flyd")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if r := h.readReply(); string(r.ID) != "2" || r.Error != nil {
		t.Errorf("reply = %s, want the result for id 2 from a restarted flyd", r.raw)
	}
	if n := strings.Count(h.logs.String(), `msg="started flyd"`); n != 2 {
		t.Errorf("started flyd %d times, want 2", n)
	}
	h.closeStdin()
	if err := h.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	checkGoroutines(t)
}

// killHelper kills the fake flyd whose pid is in state and waits until
// its socket refuses connections.
func killHelper(t *testing.T, state string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, helperPIDFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	// The relay reaps it (it started it); wait until it is gone.
	for deadline := time.Now().Add(hangAfter); proc.Signal(syscall.Signal(0)) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("fake flyd %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartersShareOneFlyd: relays started together with no flyd
// running start exactly one.
func TestStartersShareOneFlyd(t *testing.T) {
	dir := shortTempDir(t)
	sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
	flyd := setHelperEnv(t, "serve", sock, state)
	const n = 4
	var logs [n]syncBuffer
	hs := make([]*harness, n)
	for i := range hs {
		hs[i] = newHarness(t, Config{Socket: sock, StateDir: state, Flyd: flyd,
			Log: slog.New(slog.NewTextHandler(&logs[i], nil))})
	}
	for _, h := range hs {
		h.start()
	}
	for _, h := range hs {
		h.send(initialize)
	}
	for i, h := range hs {
		if r := h.readReply(); string(r.ID) != "1" || r.Error != nil {
			t.Errorf("relay %d: reply = %s, want a result", i, r.raw)
		}
		h.closeStdin()
		if err := h.wait(); err != nil {
			t.Errorf("relay %d: Run = %v, want nil", i, err)
		}
	}
	starts := 0
	for i := range logs {
		starts += strings.Count(logs[i].String(), `msg="started flyd"`)
	}
	if starts != 1 {
		for i := range logs {
			t.Logf("relay %d:\n%s", i, logs[i].String())
		}
		t.Errorf("%d relays started flyd %d times, want once", n, starts)
	}
}

// TestStartHook: Config.Start is tried before Flyd, and its failure
// falls back to Flyd or explains why flyd is not running.
func TestStartHook(t *testing.T) {
	t.Run("service", func(t *testing.T) {
		dir := shortTempDir(t)
		sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
		flyd := setHelperEnv(t, "serve", sock, state)
		var calls atomic.Int32
		start := func(ctx context.Context) error { // a service manager
			calls.Add(1)
			cmd := exec.Command(flyd[0], flyd[1:]...)
			if err := cmd.Start(); err != nil {
				return err
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
			})
			return nil
		}
		h := startRelay(t, Config{Socket: sock, StateDir: state, Start: start, Flyd: []string{"/nonexistent/flyd", "run"}})
		h.send(initialize)
		if r := h.readReply(); r.Error != nil {
			t.Errorf("reply = %s, want a result", r.raw)
		}
		h.closeStdin()
		if err := h.wait(); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("Start called %d times, want 1", n)
		}
		if _, err := os.Stat(filepath.Join(state, startLockName)); err != nil {
			t.Errorf("no start lock: %v", err)
		}
	})
	t.Run("no service", func(t *testing.T) {
		dir := shortTempDir(t)
		sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
		flyd := setHelperEnv(t, "serve", sock, state)
		start := func(context.Context) error { return ErrNoService }
		h := startRelay(t, Config{Socket: sock, StateDir: state, Start: start, Flyd: flyd})
		h.send(initialize)
		if r := h.readReply(); r.Error != nil {
			t.Errorf("reply = %s, want a result from the flyd started instead", r.raw)
		}
		h.closeStdin()
		if err := h.wait(); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
	t.Run("nothing to start", func(t *testing.T) {
		dir := shortTempDir(t)
		sock, state := filepath.Join(dir, "flyd.sock"), filepath.Join(dir, "state")
		start := func(context.Context) error { return errors.New("no service, and no flyd binary either") }
		h := startRelay(t, Config{Socket: sock, StateDir: state, Start: start})
		h.send(initialize)
		want := "flyd is not running: nothing listens on " + endpointOf(t, sock) + ", and flyctl cannot start it: no service, and no flyd binary either"
		if r := h.readReply(); r.Error == nil || r.Error.Message != want {
			t.Errorf("reply = %s, want the error %q", r.raw, want)
		}
		h.closeStdin()
		if err := h.wait(); !errors.Is(err, ErrNotRunning) {
			t.Errorf("Run = %v, want ErrNotRunning", err)
		}
		checkGoroutines(t)
	})
}

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "start.lock")
	unlock, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lockFile while held = %v, want a deadline error", err)
	}
	got := make(chan error, 1)
	go func() { // owned by the test: received from below
		u, err := lockFile(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("lockFile after unlock = %v", err)
		}
	case <-time.After(hangAfter):
		t.Fatal("lockFile did not get the lock after unlock")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger to write while a test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
