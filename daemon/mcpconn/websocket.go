package mcpconn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/fly-dev/fly/daemon/outbox"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// WebSocket is an mcp.Connection over one WebSocket: one JSON-RPC message per
// text frame.
//
// Writes never touch the socket: they queue the encoded message in the
// session's outbox, which one writer goroutine drains, each frame under
// its own deadline. So a client that stops reading costs its own session
// only, and never stalls a notification to another session.
type WebSocket struct {
	c            *websocket.Conn
	id           string
	writeTimeout time.Duration

	box *outbox.Queue[[]byte]
	wg  sync.WaitGroup

	closeOnce sync.Once

	spliceMu    sync.Mutex
	spliced     map[string][]byte // encoded placeholder → the encoded text it stands for
	splicedSize int               // bytes held in spliced
	spliceTag   string            // random, made at the first stash
	nextTag     uint64
}

// NewWebSocket wraps c and starts its writer goroutine, which Close stops
// and waits for.
func NewWebSocket(c *websocket.Conn, id string, writeTimeout time.Duration) *WebSocket {
	w := &WebSocket{
		c:            c,
		id:           id,
		writeTimeout: writeTimeout,
		box:          outbox.New[[]byte](),
	}
	w.wg.Add(1)
	go w.writeLoop()
	return w
}

// SessionID implements mcp.Connection.
func (w *WebSocket) SessionID() string { return w.id }

// Read returns the next decodable message. A frame that is not JSON-RPC
// is answered with a parse error and skipped: one bad message must not
// end the session.
func (w *WebSocket) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		typ, data, err := w.c.Read(ctx)
		if err != nil {
			if cause := w.box.Err(); cause != nil {
				return nil, cause
			}
			return nil, fmt.Errorf("read: %w", err)
		}
		if typ != websocket.MessageText {
			w.reject(jsonrpc.CodeInvalidRequest, "binary frames are not accepted: send one JSON-RPC message per text frame")
			continue
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			w.reject(jsonrpc.CodeParseError, "parse error: "+err.Error())
			continue
		}
		return BoundInitializeMessage(msg), nil
	}
}

// reject answers a frame that could not be decoded, so has no usable id.
func (w *WebSocket) reject(code int64, msg string) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: code, Message: msg}})
	if err == nil {
		w.enqueue(data, false)
	}
}

// Write queues msg. A notification (the SDK's progress and log messages)
// never waits: with a full outbox the client is not reading, and the
// connection is dropped instead. A response or request waits for room:
// until there is some, ctx ends, or the connection closes or breaks
// (which the writer makes it do once a frame misses its deadline). The
// SDK writes responses with a context that is never done, so the broken
// connection is what ends the wait of a handler whose client stopped
// reading: only then can the SDK finish its in-flight requests and close
// the session.
func (w *WebSocket) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	data = w.splice(data)
	if isNotification(msg) {
		return w.enqueue(data, true)
	}
	return w.box.Push(ctx, data, len(data), true)
}

// isNotification reports whether msg expects no answer.
func isNotification(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Request)
	return ok && !r.IsCall()
}

// encodeMessage is jsonrpc.EncodeMessage, byte for byte, but a successful
// response is written around its result rather than encoded again: the
// SDK has already encoded the result (compact, valid JSON), and
// EncodeMessage would check and compact it once more, which for a 1 MiB
// file read costs a third of flyd's time (BenchmarkBigRead).
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	r, ok := msg.(*jsonrpc.Response)
	if !ok || r.Error != nil || len(r.Result) == 0 || !r.ID.IsValid() {
		return jsonrpc.EncodeMessage(msg)
	}
	var id bytes.Buffer
	enc := json.NewEncoder(&id)
	enc.SetEscapeHTML(false) // as the SDK encodes
	if err := enc.Encode(r.ID.Raw()); err != nil {
		return nil, err
	}
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	idb := bytes.TrimSuffix(id.Bytes(), []byte("\n"))
	b := make([]byte, 0, len(head)+len(idb)+len(mid)+len(r.Result)+1)
	b = append(append(append(append(b, head...), idb...), mid...), r.Result...)
	return append(b, '}'), nil
}

// spliceMin is the smallest text worth taking out of a result: below it,
// encoding the text twice costs less than the bookkeeping. spliceMax
// bounds what one connection holds for responses not written yet (a
// response the SDK drops never takes its text back out): past it, texts
// go through the SDK's encoding.
const (
	spliceMin = 16 << 10
	spliceMax = 32 << 20
)

// Stash implements Splicer. The SDK encodes a result, then checks and
// compacts that encoding (encoding/json does so with what any
// json.Marshaler returns, and every result type is one), so a large text
// is walked three times before it is written. A handler that gives stash
// the text puts the returned placeholder in its result instead; the text
// is encoded here, once, and Write puts it back in place of the
// placeholder's encoding. The placeholder holds a NUL and a tag no client
// can guess, so nothing else in a result can match it.
func (w *WebSocket) Stash(text string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the SDK encodes
	if len(text) < spliceMin || enc.Encode(text) != nil {
		return text
	}
	w.spliceMu.Lock()
	defer w.spliceMu.Unlock()
	if w.splicedSize+buf.Len() > spliceMax {
		return text
	}
	if w.spliceTag == "" {
		w.spliceTag = randomTag()
	}
	w.nextTag++
	ph := "\x00fly-splice:" + w.spliceTag + ":" + strconv.FormatUint(w.nextTag, 10)
	key, _ := json.Marshal(ph) // a string always encodes
	if w.spliced == nil {
		w.spliced = make(map[string][]byte)
	}
	w.spliced[string(key)] = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	w.splicedSize += buf.Len()
	return ph
}

// splice puts back the texts stashed for data, an encoded message. Each
// text is used once: the entry goes with it.
func (w *WebSocket) splice(data []byte) []byte {
	w.spliceMu.Lock()
	defer w.spliceMu.Unlock()
	for key, text := range w.spliced {
		i := bytes.Index(data, []byte(key))
		if i < 0 {
			continue
		}
		out := make([]byte, 0, len(data)-len(key)+len(text))
		out = append(append(append(out, data[:i]...), text...), data[i+len(key):]...)
		data = out
		delete(w.spliced, key)
		w.splicedSize -= len(text) + 1
	}
	return data
}

// Notify sends a server notification without ever waiting: with a full
// outbox the client is not reading, and the connection is closed instead.
func (w *WebSocket) Notify(method string, params any) error {
	data, err := encodeNotification(method, params)
	if err != nil {
		return err
	}
	return w.enqueue(data, true)
}

// enqueue queues data without waiting. A full outbox drops the
// connection when dropSlow is set, else the message.
func (w *WebSocket) enqueue(data []byte, dropSlow bool) error {
	err := w.box.Push(context.Background(), data, len(data), false)
	if errors.Is(err, outbox.ErrFull) {
		if !dropSlow {
			return nil
		}
		w.fail(outbox.ErrFull)
	}
	return err
}

// writeLoop is the only writer of the socket while the connection is open.
// It ends when Close is called or a frame misses its deadline.
func (w *WebSocket) writeLoop() {
	defer w.wg.Done()
	for {
		data, ok := w.box.Take()
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.writeTimeout)
		err := w.c.Write(ctx, websocket.MessageText, data)
		cancel()
		if err != nil {
			w.fail(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// fail records why the connection broke and drops the socket at once,
// which ends the pending Read; the SDK then calls Close. It never blocks.
func (w *WebSocket) fail(cause error) {
	w.box.Fail(cause)
	w.c.CloseNow()
}

// Abort drops the connection at once, without a close handshake: for
// shutdown, when a client has not let its session close in time.
func (w *WebSocket) Abort() { w.fail(errAborted) }

// Close implements mcp.Connection. It may be called many times and
// concurrently. On a healthy connection it flushes what is queued (bounded
// by one write timeout) and sends a normal close frame.
func (w *WebSocket) Close() error {
	w.closeOnce.Do(func() {
		w.box.Close()
		w.wg.Wait()
		if w.box.Err() != nil {
			return
		}
		w.flush()
		w.c.Close(websocket.StatusNormalClosure, "")
	})
	return nil
}

// flush writes what is still queued, bounded by one write timeout.
func (w *WebSocket) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), w.writeTimeout)
	defer cancel()
	for {
		data, ok := w.box.TakeNow()
		if !ok || w.c.Write(ctx, websocket.MessageText, data) != nil {
			return
		}
	}
}

// errAborted is why an aborted connection ended.
var errAborted = errors.New("flyd is shutting down")

// randomTag is 16 hex digits no client can guess.
func randomTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
