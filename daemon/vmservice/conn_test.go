package vmservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeVM is a VM service that answers calls with answer and lets the test
// push frames of its own.
type fakeVM struct {
	srv    *httptest.Server
	frames chan []byte // sent to the client as they come
	answer func(method string, params json.RawMessage) (result any, err *Error)
}

func newFakeVM(t *testing.T, answer func(string, json.RawMessage) (any, *Error)) *fakeVM {
	t.Helper()
	f := &fakeVM{frames: make(chan []byte, 16), answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		ctx, cancel := context.WithCancel(r.Context())
		done := make(chan struct{})
		defer func() { cancel(); <-done }() // the writer goes with the handler
		go func() {                         // owned by the handler: it cancels it and waits
			defer close(done)
			for {
				select {
				case b := <-f.frames:
					if c.Write(ctx, websocket.MessageText, b) != nil {
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     string          `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(data, &req) != nil {
				continue
			}
			res, rerr := f.answer(req.Method, req.Params)
			if p, ok := res.(preceded); ok { // its frames go first, while the call waits
				for _, fr := range p.frames {
					if c.Write(ctx, websocket.MessageText, fr) != nil {
						return
					}
				}
				res = p.result
			}
			msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
			if rerr != nil {
				msg["error"] = rerr
			} else {
				msg["result"] = res
			}
			b, _ := json.Marshal(msg)
			if raw, ok := res.(unchecked); ok { // sent as it is, even what encoding/json refuses
				b = []byte(`{"jsonrpc":"2.0","id":` + strconv.Quote(req.ID) + `,"result":` + string(raw) + `}`)
			}
			if c.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// unchecked is a result the fake sends without encoding it.
type unchecked string

// preceded is a result the fake sends after frames of its own, while the
// call still waits for it.
type preceded struct {
	frames [][]byte
	result any
}

func (f *fakeVM) uri() string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/AbCdEf12345=/ws"
}

func event(stream, kind string, extra string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"streamNotify","params":{"streamId":%q,"event":{"type":"Event","kind":%q%s}}}`, stream, kind, extra)
}

func dial(t *testing.T, uri string, opt Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, uri, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next is the connection's next event, within 10 s.
func next(t *testing.T, c *Conn) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	e, ok := c.Next(ctx)
	if !ok {
		t.Fatal("no event came")
	}
	return e
}

func TestWebSocketURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ws://127.0.0.1:5555/AbC=/ws", "ws://127.0.0.1:5555/AbC=/ws"},
		{"http://127.0.0.1:5555/AbC=/", "ws://127.0.0.1:5555/AbC=/ws"},
		{"http://127.0.0.1:5555/AbC=", "ws://127.0.0.1:5555/AbC=/ws"},
		{"ws://[::1]:5555/x=", "ws://[::1]:5555/x="},
		{"ws://localhost:1/x=/ws", "ws://localhost:1/x=/ws"},
		{"ws://10.0.0.2:5555/x=/ws", ""},
		{"ws://example.com:5555/x=/ws", ""},
		{"ws://127.0.0.1.example.com:5555/x=/ws", ""},
		{"wss://127.0.0.1:5555/x=/ws", ""},
		{"file:///etc/passwd", ""},
		{"ws://user:pw@127.0.0.1:5555/x=/ws", ""},
	} {
		got, err := WebSocketURI(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("WebSocketURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzWebSocketURI(f *testing.F) {
	f.Add("ws://127.0.0.1:5555/AbC=/ws")
	f.Add("http://[::1]:1/x=/")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := WebSocketURI(s)
		if err != nil {
			return
		}
		u, _ := http.NewRequest("GET", strings.Replace(got, "ws", "http", 1), nil)
		if u == nil {
			t.Fatalf("WebSocketURI(%q) = %q, which does not parse", s, got)
		}
		if h := u.URL.Hostname(); h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1" && !strings.HasPrefix(h, "::ffff:127.") {
			t.Fatalf("WebSocketURI(%q) = %q: host %q is not loopback", s, got, h)
		}
	})
}

// TestCallsAndEvents: answers reach their calls, concurrent calls do not
// mix, an error answer is an *Error, and stream events arrive decoded.
func TestCallsAndEvents(t *testing.T) {
	vm := newFakeVM(t, func(method string, params json.RawMessage) (any, *Error) {
		switch method {
		case "getVersion":
			return map[string]any{"type": "Version", "major": 4, "minor": 16}, nil
		case "echo":
			return map[string]any{"type": "Echo", "params": params}, nil
		case "streamListen":
			return nil, &Error{Code: CodeStreamAlreadyListened, Message: "Stream already subscribed"}
		}
		return nil, &Error{Code: CodeMethodNotFound, Message: "Method not found"}
	})
	c := dial(t, vm.uri(), Options{})
	ctx := t.Context()
	var v struct{ Major, Minor int }
	if err := c.Call(ctx, "getVersion", nil, &v); err != nil || v.Major != 4 {
		t.Fatalf("getVersion = %+v, %v", v, err)
	}
	errs := make(chan error, 20)
	for i := range 20 {
		go func() { // owned by the test: it reads every result below
			var got struct {
				Params struct{ N int } `json:"params"`
			}
			err := c.Call(ctx, "echo", map[string]int{"n": i}, &got)
			if err == nil && got.Params.N != i {
				err = fmt.Errorf("call %d got the answer of call %d", i, got.Params.N)
			}
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var e *Error
	if err := c.Call(ctx, "nope", nil, nil); !errors.As(err, &e) || e.Code != CodeMethodNotFound {
		t.Errorf("unknown method = %v, want an *Error with -32601", err)
	}
	if err := c.StreamListen(ctx, "Extension"); err != nil {
		t.Errorf("StreamListen on a stream already listened to = %v, want nil", err)
	}

	vm.frames <- []byte("not json")
	vm.frames <- []byte(`{"jsonrpc":"2.0","id":"999","result":{}}`) // nobody waits for it
	vm.frames <- event("Extension", "Extension", `,"extensionKind":"Flutter.Error","isolate":{"type":"@Isolate","id":"isolates/1","name":"main","number":"1"},"timestamp":1714330000123,"extensionData":{"description":"boom"}`)
	vm.frames <- event("Stderr", "WriteEvent", `,"bytes":"aGVsbG8=","timestamp":1`)
	vm.frames <- event("Service", "ServiceRegistered", `,"service":"reloadSources","method":"s0.reloadSources","alias":"Flutter Tools"`)
	got := []Event{next(t, c), next(t, c), next(t, c)}
	if e := got[0]; e.ExtensionKind != "Flutter.Error" || e.Isolate.ID != "isolates/1" || e.Timestamp != 1714330000123 || string(e.ExtensionData) != `{"description":"boom"}` {
		t.Errorf("extension event = %+v", e)
	}
	if e := got[1]; e.StreamID != "Stderr" || e.Text != "hello" {
		t.Errorf("stderr event = %+v, want text hello", e)
	}
	if e := got[2]; e.Service != "reloadSources" || e.Method != "s0.reloadSources" {
		t.Errorf("service event = %+v", e)
	}
}

// TestHostilePeer: a flood of events is cut to the rate, an oversized
// message ends the connection (and its calls) instead of growing memory,
// and every goroutine ends with Close.
func TestHostilePeer(t *testing.T) {
	vm := newFakeVM(t, func(string, json.RawMessage) (any, *Error) { return nil, nil })
	c := dial(t, vm.uri(), Options{EventsPerSecond: 100, EventBuffer: 1000, MaxMessage: 64 << 10})
	start := time.Now()
	go func() { // owned by the test: the frames channel is drained by the server
		for range 2000 {
			vm.frames <- event("Extension", "Extension", `,"extensionKind":"Flutter.Frame"`)
		}
		vm.frames <- []byte(`{"jsonrpc":"2.0","method":"streamNotify","params":{"streamId":"Extension","event":{"kind":"` + strings.Repeat("x", 100<<10) + `"}}}`)
	}()
	kept := 0
	for _, ok := c.Next(t.Context()); ok; _, ok = c.Next(t.Context()) { // false when the oversized message ends the connection
		kept++
	}
	<-c.Done()
	if c.Err() == nil {
		t.Error("the connection ended without a reason")
	}
	// The rate allows 100 in each second that began while the burst came.
	if allowed := 100 * (int(time.Since(start)/time.Second) + 1); kept == 0 || kept > allowed {
		t.Errorf("kept %d of 2000 events in %s, want at most %d (100 a second)", kept, time.Since(start), allowed)
	}
	if int(c.Dropped())+kept != 2000 {
		t.Errorf("kept %d and dropped %d of 2000", kept, c.Dropped())
	}
	if err := c.Call(t.Context(), "getVersion", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after the end = %v, want ErrClosed", err)
	}
}

// TestLongFieldsBounded: what the peer names is cut before fly keeps it.
func TestLongFieldsBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	e, err := decodeEvent("Extension", json.RawMessage(`{"kind":"`+long+`","extensionKind":"\u0000`+long+`","isolate":{"id":"`+long+`"}}`), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{e.Kind, e.ExtensionKind, e.Isolate.ID} {
		if len(s) > maxField+len("…") || !strings.HasSuffix(s, "…") {
			t.Errorf("a field of %d bytes is kept", len(s))
		}
	}
}
