package shim

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestTrackedMethod(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`"initialize"`, methodInitialize},
		{`"notifications/initialized"`, methodInitialized},
		{`"resources/subscribe"`, methodSubscribe},
		{`"resources\/unsubscribe"`, methodUnsubscribe},
		{`"\u0069nitialize"`, methodInitialize},
		{`"tools/call"`, ""},
		{`42`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := trackedMethod(json.RawMessage(tt.raw)); got != tt.want {
			t.Errorf("trackedMethod(%s) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

// TestTracker feeds a tracker client lines and flyd's replies, then
// checks what a reconnect replays.
func TestTracker(t *testing.T) {
	tr := newTracker(slog.New(slog.DiscardHandler))
	send := func(line string) {
		t.Helper()
		msgs, batch, err := classify([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		tr.sent([]byte(line), msgs, batch)
	}
	recv := func(line string) bool {
		t.Helper()
		msgs, batch, err := classify([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return tr.received([]byte(line), msgs, batch)
	}
	if msg, _ := tr.startReplay(); msg != nil {
		t.Fatalf("replay before initialize = %s, want nothing", msg)
	}

	send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"clientInfo":{"name":"ed"}}}`)
	if swallow := recv(`{"jsonrpc":"2.0","id":"i","result":{}}`); swallow {
		t.Error("the client's initialize reply was swallowed")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`[{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"a"}},{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"b"}}]`)
	send(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"c"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"d"}}`)
	send(`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"c"}}`) // before c's reply
	recv(`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"no"}}]`)
	recv(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	// d's reply never comes: the connection is lost.

	msg, gate := tr.startReplay()
	var init struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			ClientInfo struct{ Name string } `json:"clientInfo"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &init); err != nil || init.Method != "initialize" || init.Params.ClientInfo.Name != "ed" ||
		!strings.HasPrefix(init.ID, replayIDPrefix) {
		t.Fatalf("replayed initialize = %s, want the client's under a fresh id", msg)
	}
	if !recv(`{"jsonrpc":"2.0","id":"` + init.ID + `","result":{}}`) {
		t.Error("the replayed initialize's reply was not swallowed")
	}
	if err := <-gate; err != nil {
		t.Errorf("gate = %v, want nil", err)
	}
	rest, subs := tr.finishReplay()
	var got []string
	for _, b := range rest {
		var m struct {
			ID     string               `json:"id"`
			Method string               `json:"method"`
			Params struct{ URI string } `json:"params"`
		}
		json.Unmarshal(b, &m)
		got = append(got, m.Method+" "+m.Params.URI)
		if m.ID != "" && !recv(`{"jsonrpc":"2.0","id":"`+m.ID+`","error":{"code":-32002,"message":"gone"}}`) {
			t.Errorf("reply to replayed %s not swallowed", b)
		}
	}
	want := []string{"notifications/initialized ", "resources/subscribe a"}
	if subs != 1 || !equal(got, want) {
		t.Errorf("replay after initialize = %q (%d subscriptions), want %q", got, subs, want)
	}
	// a was refused on the replay: the next one drops it.
	tr.startReplay()
	if rest, subs := tr.finishReplay(); subs != 0 || len(rest) != 1 {
		t.Errorf("second replay has %d subscriptions, want 0", subs)
	}
}

// TestTrackerListens: a 2026-07-28 client's open listen streams are kept
// in flight across a reconnect and sent again as they were; one that
// flyd ended or the client cancelled is not.
func TestTrackerListens(t *testing.T) {
	tr := newTracker(slog.New(slog.DiscardHandler))
	feed := func(line string, out bool) {
		t.Helper()
		msgs, batch, err := classify([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if out {
			tr.sent([]byte(line), msgs, batch)
		} else {
			tr.received([]byte(line), msgs, batch)
		}
	}
	open := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourcesListChanged":true}}}`
	feed(open, true)
	feed(`{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`, true)
	feed(`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true}}}`, true)
	feed(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}`, false)
	feed(`{"jsonrpc":"2.0","id":8,"result":{}}`, false)                                         // flyd ended it
	feed(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, true) // the client did
	feed(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x"}}`, true)

	if got := tr.listenReplay(); len(got) != 1 || string(got[0]) != open {
		t.Fatalf("listens to send again = %q, want only the open one", got)
	}
	if keep := tr.kept(); len(keep) != 1 || !keep["n7"] {
		t.Fatalf("kept in flight = %v, want only the open listen", keep)
	}
	if msg, _ := tr.startReplay(); msg != nil {
		t.Fatalf("a client without initialize got %s replayed", msg)
	}
}
