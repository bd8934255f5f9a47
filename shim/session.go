package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coder/websocket"
)

// One session with flyd, on one connection: replay what a lost
// connection had, relay the client's lines, drain the replies once stdin
// has ended, and say why it ended.

// session relays between in and one connection c: it first replays what
// st says the lost connection had (initialize, then initialized and the
// subscriptions once flyd has answered it), then sends the queue, then
// relays. It returns when stdin ends and the replies in flight are
// written, when ctx is done, or when the connection fails (a *lostError
// while the client may still send); c is closed when it returns.
func (r *Relay) session(ctx context.Context, c *conn, in *input, st *state) error {
	// The read loop gets its own context, so that cancelling ctx closes
	// the connection with a close frame rather than abruptly.
	readCtx, cancelRead := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRead()
	s := &relaySession{r: r, ctx: ctx, c: c, in: in, st: st, readDone: make(chan error, 1), cancelRead: cancelRead}
	defer s.stopTimer()
	defer c.watch(r.writeTimeout)()
	// Owner: every return path of the steps below waits for readDone.
	go func() { s.readDone <- r.fromDaemon(readCtx, c.ws, st) }()

	gate, err := s.replay()
	if err != nil {
		return err
	}
	if ended, err := s.relay(gate); !ended {
		return err
	}
	return s.drain()
}

// relaySession is one session's steps: replay, relay, drain. Each step
// that ends the session closes the connection and waits for the read
// loop before it returns.
type relaySession struct {
	r          *Relay
	ctx        context.Context // the session's: Run's
	c          *conn
	in         *input
	st         *state
	readDone   chan error // the read loop's result
	cancelRead context.CancelFunc
	timer      *time.Timer // the replayed initialize's deadline; nil when none
}

func (s *relaySession) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// closeAndWait closes the connection and waits for the read loop.
func (s *relaySession) closeAndWait(code websocket.StatusCode, reason string) error {
	s.c.ws.Close(code, reason)
	s.cancelRead()
	return <-s.readDone
}

// sendFailed ends the session after a failed write to flyd or Stdout.
func (s *relaySession) sendFailed(err error) error {
	var se *errStdout
	switch {
	case errors.As(err, &se):
		s.closeAndWait(websocket.StatusGoingAway, "client going away")
		return err
	case s.ctx.Err() != nil:
		s.closeAndWait(websocket.StatusGoingAway, "client going away")
		return s.ctx.Err()
	}
	s.c.ws.CloseNow()
	<-s.readDone
	return &lostError{err}
}

// replay sends the client's initialize again, if the lost connection had
// one, and returns the gate that opens when flyd has answered it: until
// then stdin waits. Without one it sends the queue at once.
func (s *relaySession) replay() (gate <-chan error, err error) {
	msg, gate := s.st.tr.startReplay()
	if msg == nil {
		if err := s.sendListens(); err != nil {
			return nil, err
		}
		if err := s.r.flush(s.ctx, s.c, s.st); err != nil {
			return nil, s.sendFailed(err)
		}
		return gate, nil
	}
	if err := s.c.write(msg); err != nil {
		return nil, s.sendFailed(err)
	}
	s.timer = time.NewTimer(s.r.cfg.StartTimeout)
	return gate, nil
}

// finishReplay sends what follows the answered initialize (initialized,
// the subscriptions), then the queue.
func (s *relaySession) finishReplay() error {
	msgs, subs := s.st.tr.finishReplay()
	for _, m := range msgs {
		if err := s.c.write(m); err != nil {
			return s.sendFailed(err)
		}
	}
	if err := s.sendListens(); err != nil {
		return err
	}
	s.r.log.Info("replayed the session on the new connection", keySubs, subs, keyQueued, len(s.st.queue))
	if err := s.r.flush(s.ctx, s.c, s.st); err != nil {
		return s.sendFailed(err)
	}
	return nil
}

// sendListens sends the client's open listen streams again, under its own
// ids: it still waits on them, and flyd acknowledges each anew.
func (s *relaySession) sendListens() error {
	listens := s.st.tr.listenReplay()
	for _, m := range listens {
		if err := s.c.write(m); err != nil {
			return s.sendFailed(err)
		}
	}
	if len(listens) > 0 {
		s.r.log.Info("listen streams sent again on the new connection", keyCount, len(listens))
	}
	return nil
}

// relay copies client lines to flyd until stdin ends (ended is true: the
// session goes on to drain) or the session ends (with err).
func (s *relaySession) relay(gate <-chan error) (ended bool, err error) {
	var timeout <-chan time.Time
	if s.timer != nil {
		timeout = s.timer.C
	}
	for {
		var lines <-chan line
		if gate == nil {
			if s.st.ended {
				return true, nil
			}
			lines = s.in.lines
		}
		select {
		case <-s.ctx.Done():
			s.closeAndWait(websocket.StatusGoingAway, "client going away")
			return false, s.ctx.Err()
		case err := <-s.readDone:
			closeAfterRead(s.c.ws, err)
			var se *errStdout
			if errors.As(err, &se) {
				return false, err
			}
			return false, &lostError{err}
		case err := <-gate:
			gate, timeout = nil, nil
			if err != nil {
				s.closeAndWait(websocket.StatusPolicyViolation, "initialize refused")
				return false, &refusedError{fmt.Errorf("flyd refused the client's initialize when the shim replayed it after a reconnect: %w", err)}
			}
			if err := s.finishReplay(); err != nil {
				return false, err
			}
		case <-timeout:
			s.c.ws.CloseNow()
			<-s.readDone
			return false, &lostError{fmt.Errorf("flyd did not answer the replayed initialize within %v", s.r.cfg.StartTimeout)}
		case l := <-lines:
			if l.b != nil {
				err := s.r.toDaemon(s.ctx, s.c, s.st, l.b)
				s.in.recycle(l.b)
				if err != nil {
					return false, s.sendFailed(err)
				}
			}
			if l.err != nil {
				s.st.end(l.err)
				return true, nil
			}
		}
	}
}

// drain runs once stdin has ended: it waits for the replies in flight,
// then closes. Were the connection lost now, nothing would be left to
// send on a new one.
func (s *relaySession) drain() error {
	st := s.st
	timer := time.NewTimer(s.r.drainTimeout)
	defer timer.Stop()
	select {
	case <-st.fl.idle():
	case err := <-s.readDone:
		closeAfterRead(s.c.ws, err)
		var se *errStdout
		if errors.As(err, &se) || st.fl.len() > 0 {
			return s.r.lost(err, st.fl)
		}
		return st.stdinErr
	case <-timer.C:
		// Close first, so that no late reply races the error replies.
		s.closeAndWait(websocket.StatusNormalClosure, "")
		n := st.fl.fail(fmt.Sprintf("flyd did not reply within %v after the client closed its input", s.r.drainTimeout), s.r.out, nil)
		s.r.log.Warn("gave up waiting for flyd's replies", keyCount, n)
		return st.stdinErr
	case <-s.ctx.Done():
		s.closeAndWait(websocket.StatusGoingAway, "client going away")
		return s.ctx.Err()
	}
	err := s.closeAndWait(websocket.StatusNormalClosure, "")
	var se *errStdout
	if errors.As(err, &se) {
		return err
	}
	return st.stdinErr
}

// flush sends the queued client lines on c, oldest first. A line stays
// queued until it has been handed to toDaemon.
func (r *Relay) flush(ctx context.Context, c *conn, st *state) error {
	for len(st.queue) > 0 {
		b := st.queue[0]
		st.queue[0] = nil
		st.queue = st.queue[1:]
		st.queued -= len(b)
		if msgs, _, err := classify(b); err == nil {
			st.requests -= len(requestIDs(msgs))
		}
		if err := r.toDaemon(ctx, c, st, b); err != nil {
			return err
		}
	}
	st.queue, st.queued, st.requests = nil, 0, 0
	return nil
}

// closeAfterRead closes ws once its read loop has ended with err: with a
// close frame when the client's stdout failed and flyd is still there,
// at once otherwise.
func closeAfterRead(ws *websocket.Conn, err error) {
	var se *errStdout
	if errors.As(err, &se) {
		ws.Close(websocket.StatusGoingAway, "client going away")
		return
	}
	ws.CloseNow()
}

// lost handles the end of the connection: unless the client's stdout is
// gone, every request in flight gets an error reply. It returns Run's
// error.
func (r *Relay) lost(err error, fl *inflight) error {
	var se *errStdout
	if errors.As(err, &se) {
		return err
	}
	reason := lostReason(err)
	n := fl.fail("flyd connection lost: "+reason+"; the request may or may not have been carried out", r.out, nil)
	if n > 0 {
		r.log.Warn("answered requests in flight with an error", keyCount, n)
	}
	return fmt.Errorf("flyd connection lost: %s", reason)
}

// lostReason says in a few words why the connection ended.
func lostReason(err error) string {
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce):
		if ce.Reason != "" {
			return fmt.Sprintf("flyd closed the session (%d %s)", ce.Code, ce.Reason)
		}
		return fmt.Sprintf("flyd closed the session (%d)", ce.Code)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed unexpectedly (did flyd exit?)"
	}
	return truncate(err.Error(), maxReason)
}
