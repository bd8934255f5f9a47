package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fly-dev/fly/daemon/outbox"
	"github.com/fly-dev/fly/internal/logkey"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Queued puts a session's outbox in front of another transport's
// connection (Streamable HTTP, in-memory in tests), whose Write may block
// for as long as its client does not read (the go-sdk's stream write has
// no deadline). One writer goroutine writes in order; a write that misses
// its deadline, or a notification that finds the outbox full, closes the
// session: the inner connection, and through abort the network
// connections of its HTTP streams, which is what unblocks a stuck write.
type Queued struct {
	mcp.Connection
	id      string
	timeout time.Duration
	abort   func() // closes the transport's network connections; may be nil
	log     *slog.Logger

	box       *outbox.Queue[queued]
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// queued is one message waiting in a Queued's outbox. res, when not
// nil, takes the result of the write.
type queued struct {
	ctx context.Context // the writer's, for the values a transport routes by
	msg jsonrpc.Message
	res chan error
}

// NewQueued wraps c and starts c's writer goroutine, which Close stops and waits for.
func NewQueued(c mcp.Connection, id string, timeout time.Duration, abort func(), log *slog.Logger) *Queued {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queued{Connection: c, id: id, timeout: timeout, abort: abort, log: log, box: outbox.New[queued]()}
	q.wg.Add(1)
	go q.writeLoop()
	return q
}

func (q *Queued) SessionID() string { return q.id }

// Write queues msg. A notification never waits; anything else waits for
// room and then for its write, bounded by the write deadline.
func (q *Queued) Write(ctx context.Context, msg jsonrpc.Message) error {
	it := queued{ctx: context.WithoutCancel(ctx), msg: msg}
	if isNotification(msg) {
		return q.push(it, false)
	}
	it.res = make(chan error, 1)
	if err := q.push(it, true); err != nil {
		return err
	}
	select {
	case err := <-it.res:
		return err
	case <-q.box.Broken():
		return q.box.Err()
	case <-q.box.Done():
		return outbox.ErrClosed
	}
}

func (q *Queued) push(it queued, wait bool) error {
	err := q.box.Push(context.Background(), it, messageSize(it.msg), wait)
	if errors.Is(err, outbox.ErrFull) {
		q.stall(outbox.ErrFull)
	}
	return err
}

// messageSize estimates a message's encoded size for the outbox's byte
// bound.
func messageSize(msg jsonrpc.Message) int {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		return len(m.Method) + len(m.Params) + 64
	case *jsonrpc.Response:
		return len(m.Result) + 64
	}
	return 64
}

func (q *Queued) Notify(method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return q.push(queued{ctx: context.Background(), msg: &jsonrpc.Request{Method: method, Params: raw}}, false)
}

// writeLoop writes queued messages in order until the outbox closes or
// fails. A write still running at its deadline stalls the session.
func (q *Queued) writeLoop() {
	defer q.wg.Done()
	for {
		it, ok := q.box.Take()
		if !ok {
			return
		}
		t := time.AfterFunc(q.timeout, func() { q.stall(errWriteStalled) })
		err := q.Connection.Write(it.ctx, it.msg)
		intime := t.Stop()
		if resp, ok := it.msg.(*jsonrpc.Response); ok && err != nil {
			// The SDK drops this error: without a line here, a result
			// its client never got leaves no trace.
			q.log.Debug("result not delivered", "session", q.id, "id", resp.ID.Raw(), logkey.Error, err)
		}
		if it.res != nil {
			it.res <- err
		}
		if !intime {
			return
		}
	}
}

var errWriteStalled = errors.New("client is not reading: a write missed its deadline")

// stall gives up on the client: the outbox fails, the network connections
// close (ending a stuck write) and so does the inner connection, which
// ends the session. It never blocks; the first call logs once.
func (q *Queued) stall(cause error) {
	if !q.box.Fail(cause) {
		return
	}
	q.log.Warn("session closed: its client does not read", "session", q.id, logkey.Error, cause)
	if q.abort != nil {
		q.abort()
	}
	_ = q.Connection.Close()
}

// Close implements mcp.Connection: the writer stops (a stuck write ends
// by its deadline at the latest), then the inner connection closes.
func (q *Queued) Close() error {
	var err error
	q.closeOnce.Do(func() {
		q.box.Close()
		err = q.Connection.Close()
		if q.abort != nil {
			q.abort()
		}
		q.wg.Wait()
	})
	return err
}

func encodeNotification(method string, params any) ([]byte, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
}
