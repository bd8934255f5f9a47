package shim

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
)

// This file holds what a reconnect replays. A new connection to flyd is a
// new MCP session, so the shim stands in for the client: it repeats the
// client's initialize (swallowing the reply the client already has), its
// notifications/initialized and every resources/subscribe still in
// effect. A client of MCP 2026-07-28 has no initialize, and its requests
// stand alone; what it holds open is its subscriptions/listen streams,
// which the shim sends again, under the client's own ids, instead of
// failing them. It learns all this by watching the client's messages go
// out and flyd's replies come back.

// Methods the tracker watches.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodSubscribe   = "resources/subscribe"
	methodUnsubscribe = "resources/unsubscribe"
	methodListen      = "subscriptions/listen"
	methodCancelled   = "notifications/cancelled"
)

// replayIDPrefix starts the string id of every request the shim sends on
// its own; flyd's replies to them never reach stdout.
const replayIDPrefix = "fly-shim/replay/"

// replayed is a request the shim sent on its own and flyd has not
// answered yet.
type replayed struct {
	uri string // of a resources/subscribe; "" for initialize
	// gate receives flyd's answer to a replayed initialize: nil, or the
	// error it returned. It is buffered and receives at most once.
	gate chan error
	// forward is set when the replayed initialize is the client's own,
	// unanswered one: its reply goes to stdout.
	forward bool
}

// tracker remembers what a new connection must replay. Requests are
// tracked as they go to flyd (sent) and subscriptions count once flyd
// has answered them with success (received). It is safe for concurrent
// use: sent runs on Run's goroutine, received on the read loop's.
type tracker struct {
	mu           sync.Mutex
	init         json.RawMessage     // the client's last initialize, as sent; nil before
	initKey      string              // idKey of its id
	initAnswered bool                // flyd has replied to it
	initialized  bool                // the client sent notifications/initialized after it
	subs         []string            // subscribed URIs, oldest first
	pending      map[string]string   // idKey of a subscribe in flight → its URI
	listens      map[string][]byte   // idKey of a subscriptions/listen open → the request, as sent
	internal     map[string]replayed // idKey of a replayed request in flight
	next         uint64              // last replay id used
	log          *slog.Logger
}

func newTracker(log *slog.Logger) *tracker {
	return &tracker{pending: make(map[string]string), listens: make(map[string][]byte), internal: make(map[string]replayed), log: log}
}

// trackedMethod returns the method of a message, given as its raw JSON
// member, when it changes what a reconnect replays; else "". The common
// spellings are matched without decoding.
func trackedMethod(raw json.RawMessage) string {
	switch string(raw) {
	case `"` + methodInitialize + `"`:
		return methodInitialize
	case `"` + methodInitialized + `"`:
		return methodInitialized
	case `"` + methodSubscribe + `"`:
		return methodSubscribe
	case `"` + methodUnsubscribe + `"`:
		return methodUnsubscribe
	case `"` + methodListen + `"`:
		return methodListen
	case `"` + methodCancelled + `"`:
		return methodCancelled
	}
	if len(raw) > 64 || len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	// A method spelled with escapes: rare, so decode it.
	var m string
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	switch m {
	case methodInitialize, methodInitialized, methodSubscribe, methodUnsubscribe, methodListen, methodCancelled:
		return m
	}
	return ""
}

// elements returns the raw messages of a line: the line itself, or the
// elements of a batch (nil if it cannot be split, which classify has
// already ruled out).
func elements(line []byte, batch bool) []json.RawMessage {
	if !batch {
		return []json.RawMessage{line}
	}
	var els []json.RawMessage
	if json.Unmarshal(line, &els) != nil {
		return nil
	}
	return els
}

// paramsURI returns params.uri of a request, or "".
func paramsURI(msg json.RawMessage) string {
	var m struct {
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return ""
	}
	return m.Params.URI
}

// replyError returns the error member of a response, or nil when it
// succeeded.
func replyError(msg json.RawMessage) json.RawMessage {
	var m struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || isNull(m.Error) {
		return nil
	}
	return m.Error
}

// sent records what line, a client line about to go to flyd whose
// messages are msgs, changes in the replay.
func (t *tracker) sent(line []byte, msgs []envelope, batch bool) {
	var els []json.RawMessage
	for i, m := range msgs {
		k := m.kind()
		if k != kindRequest && k != kindNotification {
			continue
		}
		method := trackedMethod(m.Method)
		if method == "" {
			continue
		}
		if els == nil {
			if els = elements(line, batch); len(els) != len(msgs) {
				return
			}
		}
		t.mu.Lock()
		switch {
		case method == methodInitialize && k == kindRequest:
			t.init = append(json.RawMessage(nil), els[i]...)
			t.initKey = idKey(m.ID)
			t.initAnswered = false
			t.initialized = false
		case method == methodInitialized:
			t.initialized = true
		case method == methodSubscribe && k == kindRequest:
			if uri := paramsURI(els[i]); uri != "" {
				t.pending[idKey(m.ID)] = uri
			}
		case method == methodUnsubscribe:
			if uri := paramsURI(els[i]); uri != "" {
				t.unsubscribeLocked(uri)
			}
		case method == methodListen && k == kindRequest:
			t.listens[idKey(m.ID)] = append([]byte(nil), els[i]...)
		case method == methodCancelled:
			// A listen ends by its client cancelling it.
			if id := paramsRequestID(els[i]); id != nil {
				delete(t.listens, idKey(id))
			}
		}
		t.mu.Unlock()
	}
}

// unsubscribeLocked forgets uri, subscribed or being subscribed to.
func (t *tracker) unsubscribeLocked(uri string) {
	for k, u := range t.pending {
		if u == uri {
			delete(t.pending, k)
		}
	}
	for i, u := range t.subs {
		if u == uri {
			t.subs = append(t.subs[:i], t.subs[i+1:]...)
			return
		}
	}
}

// received records what line, a message from flyd whose messages are
// msgs, changes in the replay. It reports whether the line answers a
// request the shim made on its own and must not reach stdout.
func (t *tracker) received(line []byte, msgs []envelope, batch bool) (swallow bool) {
	var els []json.RawMessage
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 && len(t.internal) == 0 && len(t.listens) == 0 && (t.init == nil || t.initAnswered) {
		return false // the usual case: nothing to learn from a reply
	}
	for i, m := range msgs {
		if m.kind() != kindResponse {
			continue
		}
		key := idKey(m.ID)
		delete(t.listens, key) // a listen's reply ends it
		if key == t.initKey && t.init != nil {
			t.initAnswered = true
		}
		uri, sub := t.pending[key]
		rp, own := t.internal[key]
		if !sub && !own {
			continue
		}
		if els == nil {
			if els = elements(line, batch); len(els) != len(msgs) {
				return false
			}
		}
		failed := replyError(els[i])
		if sub {
			delete(t.pending, key)
			if failed == nil {
				t.subscribeLocked(uri)
			}
		}
		if !own {
			continue
		}
		delete(t.internal, key)
		switch {
		case rp.gate != nil:
			var err error
			if failed != nil {
				err = &rpcFailure{failed}
			}
			rp.gate <- err // buffered, and sent to once
		case failed != nil:
			// Gone since the restart (a run's log, a deleted file):
			// the next reconnect does not try it again.
			t.unsubscribeLocked(rp.uri)
			t.log.Warn("flyd refused a subscription replayed after a reconnect; dropped it",
				keyURI, rp.uri, keyErr, (&rpcFailure{failed}).Error())
		}
		if !rp.forward && !batch {
			swallow = true
		}
	}
	return swallow
}

func (t *tracker) subscribeLocked(uri string) {
	for _, u := range t.subs {
		if u == uri {
			return
		}
	}
	t.subs = append(t.subs, uri)
}

// rpcFailure is the error member of a JSON-RPC response.
type rpcFailure struct{ raw json.RawMessage }

func (e *rpcFailure) Error() string {
	var m struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(e.raw, &m) != nil || m.Message == "" {
		return truncate(string(e.raw), maxReason)
	}
	return truncate(m.Message, maxReason) + " (code " + strconv.Itoa(m.Code) + ")"
}

// kept reports the requests in flight that a reconnect sends again under
// the client's own ids, as the client still waits for their replies: its
// initialize while unanswered, and its open listen streams.
func (t *tracker) kept() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := make(map[string]bool, len(t.listens)+1)
	if t.init != nil && !t.initAnswered {
		keep[t.initKey] = true
	}
	for k := range t.listens {
		keep[k] = true
	}
	return keep
}

// listenReplay returns the client's open listen streams, to send again on
// a new connection: flyd acknowledges each anew.
func (t *tracker) listenReplay() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([][]byte, 0, len(t.listens))
	for _, b := range t.listens {
		out = append(out, b)
	}
	return out
}

// dropListens forgets the client's listen streams, returning their
// idKeys: its input has ended, and it waits on none of them any more.
func (t *tracker) dropListens() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.listens))
	for k := range t.listens {
		keys = append(keys, k)
	}
	clear(t.listens)
	return keys
}

// paramsRequestID returns params.requestId of a notification, or nil.
func paramsRequestID(msg json.RawMessage) json.RawMessage {
	var m struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil || isNull(m.Params.RequestID) {
		return nil
	}
	return m.Params.RequestID
}

// startReplay begins the replay on a new connection: it forgets what was
// in flight on the old one and returns the initialize to send and the
// channel that receives flyd's answer. msg is nil when the client has not
// initialized, and there is nothing to replay.
func (t *tracker) startReplay() (msg []byte, gate <-chan error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.pending)
	clear(t.internal)
	if t.init == nil {
		return nil, nil
	}
	ch := make(chan error, 1)
	if !t.initAnswered {
		// The client still waits for this reply: send its own request.
		t.internal[t.initKey] = replayed{gate: ch, forward: true}
		return t.init, ch
	}
	id := t.nextIDLocked()
	msg, err := withID(t.init, id)
	if err != nil { // unreachable: init was a JSON object when it was sent
		return nil, nil
	}
	t.internal[idKey(id)] = replayed{gate: ch}
	return msg, ch
}

// finishReplay returns what follows a successful initialize: the
// client's notifications/initialized, if it sent one, and a subscribe
// for each subscription in effect.
func (t *tracker) finishReplay() (msgs [][]byte, subs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.initialized {
		return nil, 0
	}
	msgs = append(msgs, []byte(`{"jsonrpc":"2.0","method":"`+methodInitialized+`"}`))
	for _, uri := range t.subs {
		id := t.nextIDLocked()
		b, err := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  struct {
				URI string `json:"uri"`
			} `json:"params"`
		}{JSONRPC: "2.0", ID: id, Method: methodSubscribe, Params: struct {
			URI string `json:"uri"`
		}{uri}})
		if err != nil { // unreachable: every field is valid
			continue
		}
		t.internal[idKey(id)] = replayed{uri: uri}
		msgs = append(msgs, b)
	}
	return msgs, len(t.subs)
}

func (t *tracker) nextIDLocked() json.RawMessage {
	t.next++
	return json.RawMessage(strconv.Quote(replayIDPrefix + strconv.FormatUint(t.next, 10)))
}

// withID returns the JSON object msg with its id replaced by id.
func withID(msg json.RawMessage, id json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	m["id"] = id
	return json.Marshal(m)
}
