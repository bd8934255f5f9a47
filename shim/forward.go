package shim

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The messages both ways: a client's line to flyd as one frame, each of
// flyd's messages to Stdout as one line.

// toDaemon handles one non-blank line from stdin: it answers invalid and
// oversized lines itself and sends the others to flyd as one text frame.
// The error is an *errStdout when Stdout failed, otherwise a failure to
// send.
func (r *Relay) toDaemon(ctx context.Context, c *conn, st *state, line []byte) error {
	msgs, batch, err := classify(line)
	if err != nil {
		r.log.Warn("answered a line that is not JSON with a parse error", keyBytes, len(line), keyErr, err)
		return r.out.writeLine(parseErrorReply(err.Error()))
	}
	if size := int64(len(line)); c.maxMessage > 0 && size > c.maxMessage {
		r.log.Warn("refused a message over flyd's size limit", keyBytes, size, keyLimit, c.maxMessage)
		if reply := tooBigReply(msgs, batch, size, c.maxMessage); reply != nil {
			return r.out.writeLine(reply)
		}
		return nil
	}
	// Track before sending, so that a fast reply finds its request.
	for _, m := range msgs {
		if m.kind() == kindRequest {
			st.fl.add(m.ID)
		}
	}
	st.tr.sent(line, msgs, batch)
	return c.write(line)
}

// writeTimeout bounds one frame written to flyd.
const writeTimeout = 30 * time.Second

// write sends one frame to flyd. Only the session's goroutine writes. The
// write's context never ends: coder/websocket drops the connection,
// without a close frame, when the context of a write ends, even one
// already done, and a context with a deadline would cost a timer per
// message. The connection's watchdog bounds the write instead.
func (c *conn) write(msg []byte) error {
	c.writing.Store(time.Now().UnixNano())
	err := c.ws.Write(context.Background(), websocket.MessageText, msg)
	c.writing.Store(0)
	return err
}

// watch starts the connection's watchdog: every limit/2 it looks at the
// write in progress, if any, and drops the connection once that write
// has taken over limit. The caller must call stop.
func (c *conn) watch(limit time.Duration) (stop func()) {
	var mu sync.Mutex // orders the timer's creation, its re-arming and stop
	var t *time.Timer
	stopped := false
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if s := c.writing.Load(); s != 0 && time.Since(time.Unix(0, s)) > limit {
			c.ws.CloseNow() // the write fails, and the session is lost
			return
		}
		if !stopped {
			t.Reset(limit / 2)
		}
	}
	mu.Lock()
	t = time.AfterFunc(limit/2, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// fromDaemon writes each message flyd sends to Stdout until the
// connection fails, and clears the requests those messages answer.
// Replies to the requests the shim replayed on its own are not written.
// It returns the read error, or an *errStdout.
func (r *Relay) fromDaemon(ctx context.Context, ws *websocket.Conn, st *state) error {
	var buf, scratch bytes.Buffer
	for {
		_, rd, err := ws.Reader(ctx)
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return err
		}
		line, msgs, batch, err := inbound(&buf, &scratch)
		if err != nil {
			r.log.Error("dropped a message from flyd that is not JSON", keyBytes, buf.Len(), keyErr, err)
			continue
		}
		swallow := st.tr.received(line.Bytes(), msgs, batch)
		// Clear before writing: once the client has the reply it may
		// reuse the id, and its next request must stay in flight.
		for _, m := range msgs {
			if m.kind() == kindResponse {
				st.fl.done(m.ID)
			}
		}
		if !swallow {
			line.WriteByte('\n') // one write for the line and its end
			if err := r.out.writeTerminated(line.Bytes()); err != nil {
				return err
			}
		}
		if buf.Cap() > keepBuffer {
			buf = bytes.Buffer{}
		}
		if scratch.Cap() > keepBuffer {
			scratch = bytes.Buffer{}
		}
	}
}
