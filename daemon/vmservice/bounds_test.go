package vmservice

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// waitSeen waits until the connection has taken n events, queued or
// dropped: the fake writes frames on a goroutine of its own, so an
// answer to a later call may overtake them.
func waitSeen(t *testing.T, c *Conn, n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond) // how often the count is looked at
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for int64(c.Queued())+c.Dropped() < int64(n) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the connection took %d queued and %d dropped events, want %d", c.Queued(), c.Dropped(), n)
		}
	}
}

// TestQueueBoundedInBytes: events nobody reads yet are kept up to the
// queue's bytes and the rest dropped and counted, not queued without
// end; data over MaxEventData drops its event and a long write is cut.
func TestQueueBoundedInBytes(t *testing.T) {
	vm := newFakeVM(t, func(string, json.RawMessage) (any, *Error) { return map[string]any{}, nil })
	c := dial(t, vm.uri(), Options{EventBytes: 1 << 20, MaxEventData: 256 << 10, BytesPerSecond: 1 << 30})
	data := `{"x":"` + strings.Repeat("a", 200<<10) + `"}`
	for range 20 { // 4 MB, four times the queue
		vm.frames <- event("Extension", "Extension", `,"extensionKind":"Flutter.Error","extensionData":`+data)
	}
	vm.frames <- event("Extension", "Extension", `,"extensionKind":"Flutter.Error","extensionData":{"x":"`+strings.Repeat("b", 300<<10)+`"}`)
	vm.frames <- event("Stdout", "WriteEvent", `,"bytes":"`+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("\n"), 1<<20))+`"`)
	waitSeen(t, c, 22)
	c.mu.Lock()
	queued, n := c.queued, len(c.queue)
	c.mu.Unlock()
	if queued > 1<<20 {
		t.Errorf("%d bytes queued, want at most the 1 MiB budget", queued)
	}
	if n == 0 || int64(n)+c.Dropped() != 22 {
		t.Errorf("queued %d and dropped %d of 22 events", n, c.Dropped())
	}
	for e, ok := c.Poll(); ok; e, ok = c.Poll() {
		if len(e.ExtensionData) > 256<<10 {
			t.Errorf("an event of %d bytes of data was kept, over MaxEventData", len(e.ExtensionData))
		}
		if e.StreamID == "Stdout" && (len(e.Text) > 256<<10 || !e.TextCut) {
			t.Errorf("a write of 1 MiB was kept as %d bytes (cut %v), want at most 256 KiB, cut", len(e.Text), e.TextCut)
		}
	}
}

// TestNextStopsAtOnce: a reader whose context ends stops at once, with
// events still queued, rather than draining them.
func TestNextStopsAtOnce(t *testing.T) {
	vm := newFakeVM(t, func(string, json.RawMessage) (any, *Error) { return map[string]any{}, nil })
	c := dial(t, vm.uri(), Options{})
	for range 100 {
		vm.frames <- event("Stdout", "WriteEvent", `,"bytes":"aGk="`)
	}
	waitSeen(t, c, 100)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := c.Next(ctx); ok {
		t.Error("Next with a done context returned an event, want false at once")
	}
	c.Close()
	got := 0
	for _, ok := c.Next(t.Context()); ok; _, ok = c.Next(t.Context()) {
		got++
	}
	if got != 100 {
		t.Errorf("after the end %d of 100 queued events were read, want all: the peer sent them", got)
	}
}

// TestLargeAnswers: an answer over MaxMessage ends the connection, unless
// CallLarge asked for it; meanwhile an event as large is still dropped,
// and large calls take turns.
func TestLargeAnswers(t *testing.T) {
	big := strings.Repeat("p", 2<<20)
	release, arrived := make(chan struct{}), make(chan struct{})
	vm := newFakeVM(t, func(method string, _ json.RawMessage) (any, *Error) {
		switch method {
		case "shot": // an event as large comes first, while the call raised the limit
			return preceded{[][]byte{event("Extension", "Extension", `,"extensionKind":"Flutter.Error","extensionData":{"x":"`+big+`"}`)},
				map[string]any{"screenshot": big}}, nil
		case "slow": // its caller holds the turn from before it sent this
			close(arrived)
			<-release
		}
		return map[string]any{}, nil
	})
	c := dial(t, vm.uri(), Options{MaxMessage: 1 << 20, BytesPerSecond: 1 << 30})
	var res struct{ Screenshot string }
	if err := c.CallLarge(t.Context(), "shot", nil, &res, 8<<20); err != nil || len(res.Screenshot) != len(big) {
		t.Fatalf("CallLarge = %d bytes, %v; want the whole answer", len(res.Screenshot), err)
	}
	if c.Queued() != 0 || c.Dropped() != 1 {
		t.Errorf("an event over MaxMessage during a large call: queued %d, dropped %d; want dropped", c.Queued(), c.Dropped())
	}

	slow := make(chan error, 1)
	go func() { slow <- c.CallLarge(context.Background(), "slow", nil, nil, 8<<20) }() // owned by the test: read below
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow call never reached the peer")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := c.CallLarge(ctx, "shot", nil, nil, 8<<20); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second large call while one waits = %v, want it to wait its turn", err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Error(err)
	}

	if err := c.Call(t.Context(), "shot", nil, nil); err == nil {
		t.Error("a plain call's answer over MaxMessage was read, want the connection to refuse it")
	}
	<-c.Done()
}

// TestUnreadableAnswer: an answer no decoder takes (nested past
// encoding/json's depth) fails its call at once instead of leaving it
// to time out.
func TestUnreadableAnswer(t *testing.T) {
	deep := strings.Repeat(`{"children":[`, 20000) + strings.Repeat(`]}`, 20000)
	vm := newFakeVM(t, func(string, json.RawMessage) (any, *Error) { return unchecked(deep), nil })
	c := dial(t, vm.uri(), Options{CallTimeout: time.Minute})
	start := time.Now()
	err := c.Call(t.Context(), "ext.flutter.inspector.getRootWidgetTree", nil, nil)
	if !errors.Is(err, ErrUnreadable) {
		t.Errorf("a call answered 20,000 levels deep = %v, want ErrUnreadable", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the call took %s: it waited for its timeout", d)
	}
}

func TestPeek(t *testing.T) {
	for _, tc := range []struct{ in, id, method string }{
		{`{"jsonrpc":"2.0","id":"12","result":{}}`, "12", ""},
		{`{"result":{"a":[1,{"id":"x"}]},"id":7}`, "7", ""},
		{` { "method" : "streamNotify" , "params":{"streamId":"a\"}"}}`, "", "streamNotify"},
		{`{"params":{"method":"no"},"method":"streamNotify"}`, "", "streamNotify"},
		{`{"id":null}`, "", ""},
		{`[1,2]`, "", ""},
		{`not json`, "", ""},
		{`{"id":"` + strings.Repeat("x", 300) + `"}`, "", ""},
		{`{"result":` + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + `,"id":"3"}`, "3", ""},
	} {
		if id, m := peek([]byte(tc.in)); id != tc.id || m != tc.method {
			t.Errorf("peek(%.60s) = %q, %q; want %q, %q", tc.in, id, m, tc.id, tc.method)
		}
	}
}

// FuzzPeek: on any message encoding/json decodes, peek finds the same
// method, and the same id when there is no method (an answer); on any
// other input it does not panic.
func FuzzPeek(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":"1","result":{"x":"}"}}`)
	f.Add(`{"method":"streamNotify","params":{"event":{"kind":"\\\""}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		id, method := peek([]byte(s))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
		}
		if json.Unmarshal([]byte(s), &m) != nil {
			return
		}
		if len(m.ID) <= maxPeekValue && method == "" && scalar(m.ID) != id { // with a method, the id is not read
			t.Errorf("peek(%q) id = %q, want %q", s, id, scalar(m.ID))
		}
		if len(m.Method) <= maxPeekValue && scalar(m.Method) != method {
			t.Errorf("peek(%q) method = %q, want %q", s, method, scalar(m.Method))
		}
	})
}
