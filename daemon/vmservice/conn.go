package vmservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Options bound a connection. The zero value of a field means its
// default.
type Options struct {
	MaxMessage      int64         // largest message read (default 4 MiB); a larger one ends the connection
	EventsPerSecond int           // events kept per second (default 1000); the rest are dropped and counted
	BytesPerSecond  int64         // bytes of events kept per second (default 8 MiB); likewise
	EventBuffer     int           // events waiting for Next (default 1024); the rest are dropped and counted
	EventBytes      int64         // bytes of events waiting for Next (default 8 MiB); likewise
	MaxEventData    int           // an event's data and text (default 1 MiB): larger data drops the event, larger text is cut
	CallTimeout     time.Duration // of a call whose context has no deadline (default 30s)
}

func (o *Options) setDefaults() {
	if o.MaxMessage <= 0 {
		o.MaxMessage = 4 << 20
	}
	if o.EventsPerSecond <= 0 {
		o.EventsPerSecond = 1000
	}
	if o.BytesPerSecond <= 0 {
		o.BytesPerSecond = 8 << 20
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 1024
	}
	if o.EventBytes <= 0 {
		o.EventBytes = 8 << 20
	}
	if o.MaxEventData <= 0 {
		o.MaxEventData = 1 << 20
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
}

// ErrNotLoopback is returned for a URI whose host is not a loopback
// address.
var ErrNotLoopback = errors.New("not a loopback address")

// ErrClosed is returned by calls on a connection that has ended.
var ErrClosed = errors.New("vm service connection closed")

// WebSocketURI checks a VM service, DDS or DTD URI and returns the
// WebSocket URI to dial: ws:// as given, or the ws form of an http://
// URI (path + "ws", as flutter_tools derives it). The host must be a
// loopback IP or localhost.
func WebSocketURI(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("vm service uri %q: %w", raw, err)
	}
	switch u.Scheme {
	case "ws":
	case "http":
		u.Scheme = "ws"
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		u.Path += "ws"
	default:
		return "", fmt.Errorf("vm service uri %q: scheme %q is not ws or http", raw, u.Scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("vm service uri %q: user info is not accepted", raw)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("vm service uri %q: %w", raw, ErrNotLoopback)
	}
	return u.String(), nil
}

// Error is a JSON-RPC error the peer answered a call with.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return "vm service error " + strconv.Itoa(e.Code) + ": " + e.Message }

// Error codes a caller branches on (reference §1.6).
const (
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeStreamAlreadyListened = 103
	CodeStreamNotListened     = 104
)

// Conn is one connection. Its methods may be called concurrently. It owns
// one reader goroutine, which Close stops and waits for.
type Conn struct {
	ws  *websocket.Conn
	opt Options

	dropped atomic.Int64
	large   chan struct{} // held by the one call whose answer may exceed MaxMessage

	mu      sync.Mutex
	nextID  uint64
	pending map[string]chan response
	err     error // why the connection ended; set once

	queue     []Event       // events waiting for Next, oldest first
	queued    int64         // their bytes
	wake      chan struct{} // signalled when an event is queued
	window    time.Time     // start of the current second of events
	inWindow  int
	bytesIn   int64 // bytes of events kept in the current second
	done      chan struct{}
	closeOnce sync.Once
	readDone  chan struct{}
}

type response struct {
	result json.RawMessage
	err    error
}

// Dial connects to a VM service, DDS or DTD at uri (see WebSocketURI).
func Dial(ctx context.Context, uri string, opt Options) (*Conn, error) {
	ws, err := WebSocketURI(uri)
	if err != nil {
		return nil, err
	}
	opt.setDefaults()
	c, _, err := websocket.Dial(ctx, ws, nil)
	if err != nil {
		return nil, fmt.Errorf("dial vm service: %w", err)
	}
	c.SetReadLimit(opt.MaxMessage)
	conn := &Conn{ws: c, opt: opt, pending: map[string]chan response{}, large: make(chan struct{}, 1),
		wake: make(chan struct{}, 1), done: make(chan struct{}), readDone: make(chan struct{})}
	go conn.readLoop() // owned by conn: Close waits for it
	return conn, nil
}

// Next returns the next event the peer sent, in order, on every stream
// the connection listens to, waiting for one. It returns false once ctx
// is done (at once, whatever is still queued) or once the connection has
// ended and its queue is empty. Events that exceed the rate, the queue's
// bounds or MaxEventData are dropped and counted (Dropped), never queued.
// One goroutine at a time may call it.
func (c *Conn) Next(ctx context.Context) (Event, bool) {
	for {
		if ctx.Err() != nil {
			return Event{}, false
		}
		if e, ok := c.Poll(); ok {
			return e, true
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return Event{}, false
		case <-c.done:
			if e, ok := c.Poll(); ok {
				return e, true
			}
			return Event{}, false
		}
	}
}

// Poll returns the next queued event without waiting.
func (c *Conn) Poll() (Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return Event{}, false
	}
	e := c.queue[0]
	c.queue[0] = Event{}
	c.queue = c.queue[1:]
	c.queued -= e.size()
	if len(c.queue) == 0 {
		c.queue = nil // let a burst's backing array go
	}
	return e, true
}

// Queued is how many events wait for Next.
func (c *Conn) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Dropped is how many events were not kept.
func (c *Conn) Dropped() int64 { return c.dropped.Load() }

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Call sends method with params (an object, or nil) and decodes the
// result into result (may be nil). An error answer is an *Error. A call
// whose ctx has no deadline is bounded by Options.CallTimeout. An answer
// larger than MaxMessage ends the connection: see CallLarge.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result)
}

// CallLarge is Call for an answer that may be up to limit bytes (a
// screenshot, a widget tree): while it waits, the connection reads
// messages up to limit, but still drops every event larger than
// MaxMessage. One such call runs at a time on a connection; the others
// wait for it within their ctx.
func (c *Conn) CallLarge(ctx context.Context, method string, params, result any, limit int64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.CallTimeout)
		defer cancel()
	}
	select {
	case c.large <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for another large answer: %w", method, ctx.Err())
	case <-c.done:
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
	defer func() { <-c.large }()
	if limit > c.opt.MaxMessage {
		c.ws.SetReadLimit(limit)
		defer c.ws.SetReadLimit(c.opt.MaxMessage)
	}
	return c.call(ctx, method, params, result)
}

func (c *Conn) call(ctx context.Context, method string, params, result any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.CallTimeout)
		defer cancel()
	}
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.nextID++
	id := strconv.FormatUint(c.nextID, 10)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if result != nil {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	case <-c.done:
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
}

// StreamListen subscribes to a stream. A stream already subscribed (after
// a reconnect, or twice) is not an error.
func (c *Conn) StreamListen(ctx context.Context, stream string) error {
	err := c.Call(ctx, "streamListen", map[string]string{"streamId": stream}, nil)
	var e *Error
	if errors.As(err, &e) && e.Code == CodeStreamAlreadyListened {
		return nil
	}
	return err
}

// StreamHistory returns what DDS buffered of a stream (Extension,
// Logging, Stdout or Stderr), oldest first, within the bounds of the
// queue: at most EventBuffer events of at most EventBytes in all, each
// within MaxEventData. A plain VM service has no history: its -32601 is
// returned as an *Error.
func (c *Conn) StreamHistory(ctx context.Context, stream string) ([]Event, error) {
	var res struct {
		History []json.RawMessage `json:"history"`
	}
	if err := c.Call(ctx, "getStreamHistory", map[string]string{"stream": stream}, &res); err != nil {
		return nil, err
	}
	out := make([]Event, 0, min(len(res.History), c.opt.EventBuffer))
	var bytes int64
	for _, raw := range res.History[max(0, len(res.History)-c.opt.EventBuffer):] { // the newest
		e, err := decodeEvent(stream, raw, c.opt.MaxEventData)
		if err != nil || bytes+e.size() > c.opt.EventBytes {
			c.dropped.Add(1)
			continue
		}
		bytes += e.size()
		out = append(out, e)
	}
	return out, nil
}

// Close ends the connection and waits for its reader. It may be called
// many times.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.ws.Close(websocket.StatusNormalClosure, "")
	})
	<-c.readDone
	return nil
}

// message is an answer the peer sends.
type message struct {
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// notifyParams are the params of a streamNotify: the VM's carry an
// event object, DTD's (the reference's §4.3) an eventKind and eventData.
type notifyParams struct {
	StreamID  string          `json:"streamId"`
	Event     *wireEvent      `json:"event"`
	EventKind string          `json:"eventKind"`
	EventData json.RawMessage `json:"eventData"`
	Timestamp int64           `json:"timestamp"`
}

// ErrUnreadable is the error of a call whose answer came but could not
// be decoded (nested deeper than a decoder goes, say).
var ErrUnreadable = errors.New("the answer could not be read")

// readLoop reads until the connection ends: answers go to their calls,
// stream notifications to the queue. A frame that is not a JSON-RPC
// message is skipped: one bad message does not end the connection. A
// notification over the rate is dropped before it is decoded.
func (c *Conn) readLoop() {
	defer close(c.readDone)
	var err error
	for {
		var typ websocket.MessageType
		var data []byte
		typ, data, err = c.ws.Read(context.Background())
		if err != nil {
			break
		}
		if typ != websocket.MessageText {
			continue
		}
		id, method := peek(data)
		switch {
		case method == "streamNotify":
			if int64(len(data)) > c.opt.MaxMessage || !c.admit(len(data)) {
				c.dropped.Add(1) // over the rate, or as large as only a large answer may be
				continue
			}
			var m struct {
				Params *notifyParams `json:"params"`
			}
			if json.Unmarshal(data, &m) != nil || m.Params == nil { // one pass: the event's data stays raw
				continue
			}
			c.notify(*m.Params)
		case id != "" && method == "":
			var m message
			if err := json.Unmarshal(data, &m); err != nil {
				c.answer(id, response{err: fmt.Errorf("%w: %w", ErrUnreadable, err)})
				continue
			}
			r := response{result: m.Result}
			if m.Error != nil {
				r.err = m.Error
			}
			c.answer(id, r)
		}
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
	c.ws.CloseNow()
}

// admit counts a notification of n bytes against the second's rate, and
// reports whether it is within it.
func (c *Conn) admit(n int) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.window) >= time.Second {
		c.window, c.inWindow, c.bytesIn = now, 0, 0
	}
	if c.inWindow >= c.opt.EventsPerSecond || c.bytesIn+int64(n) > c.opt.BytesPerSecond {
		return false
	}
	c.inWindow++
	c.bytesIn += int64(n)
	return true
}

// answer hands a response to the call waiting for it, if any.
func (c *Conn) answer(id string, r response) {
	c.mu.Lock()
	ch := c.pending[id]
	c.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- r:
	default:
	}
}

// notify queues a stream event, within the queue's bounds.
func (c *Conn) notify(p notifyParams) {
	if p.StreamID == "" || (p.Event == nil && p.EventKind == "") {
		return
	}
	if p.Event == nil { // DTD's shape
		p.Event = &wireEvent{Kind: p.EventKind, Timestamp: p.Timestamp, ExtensionData: p.EventData}
	}
	if len(p.Event.ExtensionData) > c.opt.MaxEventData {
		c.dropped.Add(1)
		return
	}
	e := p.Event.event(p.StreamID, c.opt.MaxEventData)
	n := e.size()
	c.mu.Lock()
	if len(c.queue) >= c.opt.EventBuffer || c.queued+n > c.opt.EventBytes {
		c.mu.Unlock()
		c.dropped.Add(1)
		return
	}
	c.queue = append(c.queue, e)
	c.queued += n
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
