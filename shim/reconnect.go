package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/coder/websocket"
)

// This file holds what the relay does between connections: it keeps the
// client's lines while it (re)connects, answers what was in flight when a
// connection was lost, and answers everything when no connection is
// possible. The replay itself is in replay.go.

// state is what outlives one connection to flyd. fl and tr are shared
// with the read loop; the rest belongs to Run's goroutine.
type state struct {
	fl *inflight
	tr *tracker

	queue    [][]byte // client lines not yet sent, oldest first
	queued   int      // their bytes
	requests int      // requests among them

	ended    bool  // stdin ended
	stdinErr error // and why, when not io.EOF
}

// push queues a copy of a client line.
func (st *state) push(b []byte) {
	st.queue = append(st.queue, bytes.Clone(b))
	st.queued += len(b)
	if msgs, _, err := classify(b); err == nil {
		st.requests += len(requestIDs(msgs))
	}
}

// full reports whether the queue takes no more lines for now.
func (st *state) full() bool {
	return len(st.queue) >= maxQueueLines || st.queued >= maxQueueBytes
}

// end records the end of stdin.
func (st *state) end(err error) {
	st.ended = true
	// A listen stream lasts until its client goes: none waits for its end.
	st.fl.forget(st.tr.dropListens())
	if err != io.EOF {
		st.stdinErr = fmt.Errorf("read stdin: %w", err)
	}
}

// waiting reports whether a request waits for a reply from flyd.
func (st *state) waiting() bool { return st.requests > 0 || st.fl.len() > 0 }

// errStdinEnded is await's error when stdin ended while connecting and no
// request waits for flyd: there is nothing left to relay.
var errStdinEnded = errors.New("stdin ended")

// await runs dial on a goroutine of its own and meanwhile reads the
// client's lines into st's queue (until it is full), so that what a client
// writes while flyd (re)starts is kept for the new connection. It returns
// dial's result; or errStdinEnded once stdin ends with no request
// waiting, after stopping dial.
func (r *Relay) await(ctx context.Context, in *input, st *state, dial func(context.Context) (*conn, error)) (*conn, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   *conn
		err error
	}
	done := make(chan result, 1)
	// Owner: every return below has received from done. dial returns
	// soon after dctx is done.
	go func() {
		c, err := dial(dctx)
		done <- result{c, err}
	}()
	for {
		var lines <-chan line
		if !st.ended && !st.full() {
			lines = in.lines
		}
		select {
		case res := <-done:
			return res.c, res.err
		case l := <-lines:
			if l.b != nil {
				st.push(l.b)
				in.recycle(l.b)
			}
			if l.err != nil {
				st.end(l.err)
				if !st.waiting() {
					cancel()
					if res := <-done; res.c != nil {
						res.c.ws.Close(websocket.StatusNormalClosure, "")
					}
					return nil, errStdinEnded
				}
			}
		}
	}
}

// dropped handles a connection lost mid-session before reconnecting:
// each request in flight gets the restart error, except the client's
// initialize while unanswered and its listen streams, which the next
// connection sends again. The error is non-nil only when Stdout failed.
func (r *Relay) dropped(cause error, st *state) error {
	keep := st.tr.kept()
	reason := lostReason(cause)
	n := st.fl.fail(restartedMessage+" (the connection was lost: "+reason+")", r.out, keep)
	// A warning only when the client saw requests fail: a reconnect that
	// no request noticed is nothing to act on.
	level := slog.LevelInfo
	if n > 0 {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "lost the connection to flyd; reconnecting", keyReason, reason, keyCount, n)
	return r.out.failed()
}

// refuse answers the client once no session with flyd is possible: the
// requests in flight and queued get an error carrying err, and so does
// each new request until stdin ends, ctx is done or refuseLinger passes.
// It returns err, or the error writing to Stdout.
func (r *Relay) refuse(ctx context.Context, in *input, st *state, err error) error {
	r.log.Error("no session with flyd is possible", keyErr, err)
	msg := err.Error()
	st.fl.fail(msg, r.out, nil)
	for _, b := range st.queue {
		r.answer(b, msg)
	}
	st.queue, st.queued, st.requests = nil, 0, 0
	if werr := r.out.failed(); werr != nil {
		return werr
	}
	if st.ended {
		return err
	}
	timer := time.NewTimer(r.refuseLinger)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return err
		case l := <-in.lines:
			if l.b != nil {
				r.answer(l.b, msg)
				in.recycle(l.b)
				if werr := r.out.failed(); werr != nil {
					return werr
				}
			}
			if l.err != nil {
				st.end(l.err)
				return err
			}
		}
	}
}

// answer replies to the requests in a client line with an error carrying
// msg, as flyd cannot. A line that is not JSON gets a parse error.
func (r *Relay) answer(line []byte, msg string) {
	msgs, batch, err := classify(line)
	if err != nil {
		r.out.writeLine(parseErrorReply(err.Error()))
		return
	}
	ids := requestIDs(msgs)
	switch {
	case len(ids) == 0:
	case batch:
		r.out.writeLine(errorBatch(ids, codeInternalError, msg))
	default:
		r.out.writeLine(errorReply(ids[0], codeInternalError, msg))
	}
}
