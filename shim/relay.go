package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Defaults for Config and the relay's bounds.
const (
	// DefaultStartTimeout bounds dialing and retrying after starting flyd.
	DefaultStartTimeout = 10 * time.Second

	// DefaultReconnectTimeout bounds how long the relay tries to get a
	// lost connection back before it gives up.
	DefaultReconnectTimeout = 60 * time.Second

	// drainTimeout bounds the wait for in-flight replies once stdin ends.
	drainTimeout = 30 * time.Second

	// restartAfter is how long a reconnect only dials before it starts
	// flyd itself: a service manager, or a person upgrading flyd by
	// hand, gets the first chance to bring it back.
	restartAfter = 2 * time.Second

	// refuseLinger is how long the relay keeps answering the client's
	// requests with an error once no session with flyd is possible,
	// unless stdin ends first: the client learns why from a reply to its
	// request (typically initialize), not only from a closed pipe.
	refuseLinger = 5 * time.Second

	// The backoff of a reconnect's dials.
	reconnectFirstBackoff = 50 * time.Millisecond
	reconnectMaxBackoff   = time.Second

	// Bounds of the queue of client lines read while no connection is up.
	// When it is full the relay stops reading stdin until one is.
	maxQueueLines = 1024
	maxQueueBytes = 64 << 20

	// readLimit is the largest message the shim accepts from flyd.
	readLimit = 256 << 20

	// keepBuffer is the largest buffer kept for reuse between messages;
	// a bigger one is dropped after use so one huge message does not pin
	// its memory for the rest of the session.
	keepBuffer = 4 << 20
)

// Attribute keys of the relay's log records.
const (
	keySocket  = "socket"
	keyLog     = "log"
	keyPID     = "pid"
	keyBytes   = "bytes"
	keyLimit   = "limit"
	keyCount   = "count"
	keyErr     = "err"
	keyHeader  = "header"
	keyValue   = "value"
	keyURI     = "uri"
	keyReason  = "reason"
	keySubs    = "subscriptions"
	keyQueued  = "queued"
	keyElapsed = "elapsed_ms"
	keyLock    = "lock"
)

// ErrNotRunning reports that nothing listens on flyd's socket and the
// relay could not start flyd (Config.Flyd is nil, and Config.Start is nil
// or failed).
var ErrNotRunning = errors.New("flyd is not running")

// ErrNoService is what a Config.Start returns when no flyd service is
// installed: the relay then starts Config.Flyd without a word of warning.
var ErrNoService = errors.New("no flyd service is installed")

// restartedMessage is the error the client gets for a request that was in
// flight when the connection to flyd was lost and the relay reconnects.
const restartedMessage = "flyd restarted; the request was not replayed, send it again"

// Config is what a Relay needs. The caller builds it from flags and the
// environment; the shim reads neither itself.
type Config struct {
	// Socket is flyd's Unix socket and StateDir its state directory
	// (where a started flyd logs, to flyd.log, and where start.lock
	// serialises starts). Both come from internal/paths.
	Socket, StateDir string

	// Workspace is the absolute workspace root the session is bound to.
	Workspace string

	// Env is the client's flutter-relevant environment, as encoded by
	// wire.EncodeEnv.
	Env string

	// Tools and Disable are the session's tool filter (flyctl mcp --tools,
	// --disable), passed to flyd as ?tools= and ?disable=.
	Tools, Disable []string

	// Start, if set, is tried first when no daemon answers: typically it
	// asks the service manager to start an installed flyd service. It
	// returns once the start is under way (the relay then dials until
	// StartTimeout), or an error (ErrNoService when there is nothing to
	// start), in which case the relay starts Flyd. It is called with the
	// start lock held and a context bounded by StartTimeout.
	Start func(ctx context.Context) error

	// Flyd is the argv that starts the daemon detached when none answers
	// and Start did not bring one up, for example
	// {"/usr/local/bin/flyd", "run"}. Nil means never start one this way.
	Flyd []string

	// StartTimeout bounds dialing and retrying after a start, and each
	// WebSocket handshake. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// ReconnectTimeout bounds how long the relay tries to reconnect when
	// the connection to flyd is lost mid-session. Zero means
	// DefaultReconnectTimeout; a negative value turns reconnecting off,
	// so that Run returns when the connection is lost.
	ReconnectTimeout time.Duration

	// Stdin carries the client's newline-delimited JSON-RPC messages and
	// Stdout receives flyd's, one per line. Stdout receives nothing else.
	Stdin  io.Reader
	Stdout io.Writer

	// Log receives diagnostics (it should write to stderr, never to
	// Stdout). Nil discards them.
	Log *slog.Logger
}

// Relay relays one MCP client's stdio stream to a flyd session over the
// Unix socket and back, reconnecting when flyd goes away. It is created
// by New and used by one call to Run.
type Relay struct {
	cfg Config
	log *slog.Logger
	out *lineWriter

	// Timings that tests shorten.
	drainTimeout time.Duration
	restartAfter time.Duration
	refuseLinger time.Duration
	writeTimeout time.Duration

	// client dials the socket. Its transport is closed by Run.
	client *http.Client
}

// New returns a Relay for cfg. It does no I/O: Run connects.
func New(cfg Config) *Relay {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.ReconnectTimeout == 0 {
		cfg.ReconnectTimeout = DefaultReconnectTimeout
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{
		cfg:          cfg,
		log:          log,
		out:          &lineWriter{w: cfg.Stdout},
		drainTimeout: drainTimeout,
		restartAfter: restartAfter,
		refuseLinger: refuseLinger,
		writeTimeout: writeTimeout,
		client:       unixClient(cfg.Socket),
	}
}

// Run connects to flyd (starting it if needed and allowed) and relays
// until one of these happens:
//   - Stdin ends: Run waits until every request in flight has its reply
//     written to Stdout (at most 30s, less if flyd goes away), closes the
//     session normally and returns nil (or Stdin's read error);
//   - ctx is done: Run closes the session and returns ctx.Err();
//   - no session with flyd is possible (it is not running and cannot be
//     started, it speaks another protocol version, it did not come back
//     within ReconnectTimeout): Run answers the requests waiting for flyd,
//     and for a few seconds any new one, with a JSON-RPC error that says
//     why, and returns that error.
//
// When the connection to flyd is lost mid-session, Run keeps Stdin and
// Stdout open and reconnects (see Config.ReconnectTimeout). The requests
// in flight get a JSON-RPC error saying that flyd restarted and are never
// sent again. On the new connection Run replays the client's initialize
// (its reply is not written to Stdout), notifications/initialized and
// every resources/subscribe still in effect; then it sends what the
// client wrote in the meantime, which it queued.
//
// Run blocks until then, and every goroutine it started has ended when it
// returns, with two exceptions. A flyd it started keeps running, and a
// goroutine waits for it to exit. And Run never closes Stdin: if it
// returns early while a Read on Stdin blocks, it sets a read deadline on
// Stdin when Stdin supports one (and waits for the read to end, then
// clears the deadline); otherwise the reading goroutine ends when that
// Read returns, consuming nothing more. Writes to Stdout are not
// interrupted: while Stdout blocks, so does the relay. Run must be called
// only once.
func (r *Relay) Run(ctx context.Context) error {
	if t, ok := r.client.Transport.(*http.Transport); ok {
		defer t.CloseIdleConnections()
	}
	in := startInput(r.cfg.Stdin)
	defer in.stop()
	st := &state{fl: newInflight(), tr: newTracker(r.log)}
	c, err := r.await(ctx, in, st, r.connect)
	for {
		switch {
		case errors.Is(err, errStdinEnded):
			return st.stdinErr
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return r.refuse(ctx, in, st, err)
		}
		err = r.session(ctx, c, in, st)
		var lost *lostError
		var refused *refusedError
		switch {
		case errors.As(err, &refused):
			return r.refuse(ctx, in, st, refused.err)
		case !errors.As(err, &lost):
			return err
		case r.cfg.ReconnectTimeout < 0:
			return r.lost(lost.err, st.fl)
		}
		if err := r.dropped(lost.err, st); err != nil {
			return err
		}
		began := time.Now()
		c, err = r.await(ctx, in, st, r.redial)
		if err == nil {
			r.log.Info("reconnected to flyd", keyElapsed, time.Since(began).Milliseconds(), keyQueued, len(st.queue))
		}
	}
}

// errStdout marks a failed write to Stdout: the client is gone.
type errStdout struct{ err error }

func (e *errStdout) Error() string { return "write to stdout: " + e.err.Error() }
func (e *errStdout) Unwrap() error { return e.err }

// lostError is session's error when the connection failed while the
// client may still send: Run reconnects.
type lostError struct{ err error }

func (e *lostError) Error() string { return "flyd connection lost: " + lostReason(e.err) }
func (e *lostError) Unwrap() error { return e.err }

// refusedError is session's error when flyd refused the replayed
// initialize: no session is possible.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

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

// lineWriter writes whole lines to Stdout. Its mutex makes it the one
// writer of Stdout: lines from the read loop and the shim's own replies
// never interleave. After a failed write it fails every later one.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	scratch []byte
	err     error
}

// writeLine writes b and a newline. It blocks while Stdout does.
func (lw *lineWriter) writeLine(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	var err error
	if len(b) < 64<<10 { // one write: one syscall, one pipe chunk
		lw.scratch = append(append(lw.scratch[:0], b...), '\n')
		_, err = lw.w.Write(lw.scratch)
	} else if _, err = lw.w.Write(b); err == nil {
		_, err = lw.w.Write([]byte{'\n'})
	}
	if err != nil {
		lw.err = &errStdout{err}
	}
	return lw.err
}

// writeTerminated writes b, which ends with its newline, in one call.
func (lw *lineWriter) writeTerminated(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	if _, err := lw.w.Write(b); err != nil {
		lw.err = &errStdout{err}
	}
	return lw.err
}

// failed returns the error of the failed write to Stdout, if any.
func (lw *lineWriter) failed() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}

// inflight is the set of requests sent to flyd and not yet answered,
// keyed by idKey. It is safe for concurrent use.
type inflight struct {
	mu     sync.Mutex
	ids    map[string]json.RawMessage // id as the client sent it
	idleCh chan struct{}              // closed when ids empties; nil if no one waits
}

func newInflight() *inflight {
	return &inflight{ids: make(map[string]json.RawMessage)}
}

// forget drops the requests whose idKeys are keys: no reply to them is
// awaited any more.
func (f *inflight) forget(keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.ids, k)
	}
	f.signalLocked()
}

// add records a request id. id must not be modified afterwards.
func (f *inflight) add(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids[idKey(id)] = id
}

// done forgets id, which has been answered.
func (f *inflight) done(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, idKey(id))
	f.signalLocked()
}

func (f *inflight) signalLocked() {
	if len(f.ids) == 0 && f.idleCh != nil {
		close(f.idleCh)
		f.idleCh = nil
	}
}

// len is the number of requests in flight.
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

// idle returns a channel that is closed once no request is in flight.
func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	switch {
	case len(f.ids) == 0:
		close(ch)
	case f.idleCh != nil:
		ch = f.idleCh
	default:
		f.idleCh = ch
	}
	return ch
}

// fail answers every request in flight but those whose idKey is in keep
// with an internal error carrying msg, written to out, and forgets them.
// It returns how many there were. The caller must make sure no reply from
// flyd can still be written.
func (f *inflight) fail(msg string, out *lineWriter, keep map[string]bool) int {
	f.mu.Lock()
	ids := f.ids
	f.ids = make(map[string]json.RawMessage)
	for k := range keep {
		if id, ok := ids[k]; ok {
			f.ids[k] = id
			delete(ids, k)
		}
	}
	f.signalLocked()
	f.mu.Unlock()
	for _, id := range ids {
		if out.writeLine(errorReply(id, codeInternalError, msg)) != nil {
			break
		}
	}
	return len(ids)
}

// line is one line of stdin, or its end.
type line struct {
	b   []byte // without its line ending; nil with err
	err error  // io.EOF at the end, or the read error; b is then nil
}

// input reads stdin on its own goroutine so that the session can wait for
// a line, the daemon and ctx at once. It hands over each non-blank line
// in a buffer the session gives back with recycle; two buffers circulate,
// so it reads one line ahead.
type input struct {
	r     io.Reader
	lines chan line     // unbuffered; the last value carries err
	free  chan []byte   // buffers to read into
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when the goroutine ends
}

// startInput starts reading r. The caller must call stop.
func startInput(r io.Reader) *input {
	in := &input{
		r:     r,
		lines: make(chan line),
		free:  make(chan []byte, 2),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	in.free <- nil
	in.free <- nil
	// Owner: stop waits for done (see Run for a Read that cannot be
	// interrupted).
	go in.run()
	return in
}

func (in *input) run() {
	defer close(in.done)
	br := bufio.NewReaderSize(in.r, 64<<10)
	for {
		var buf []byte
		select {
		case buf = <-in.free:
		case <-in.quit:
			return
		}
		b, err := readLine(br, buf[:0])
		b = trimEOL(b)
		var l line
		switch {
		case err != nil:
			l.err = err
			if !isBlank(b) {
				// Hand over the last line first, then the end.
				select {
				case in.lines <- line{b: b}:
				case <-in.quit:
					return
				}
			}
		case isBlank(b):
			in.free <- b
			continue
		default:
			l.b = b
		}
		select {
		case in.lines <- l:
		case <-in.quit:
			return
		}
		if l.err != nil {
			return
		}
	}
}

// readLine appends the next line of br, with its "\n", to buf. It has no
// length limit. err is non-nil only when the input ended or failed; the
// returned bytes are then the unterminated rest.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// recycle gives a line's buffer back for reading the next one.
func (in *input) recycle(b []byte) {
	if cap(b) > keepBuffer {
		b = nil
	}
	select {
	case in.free <- b:
	default: // unreachable: at most two buffers circulate
	}
}

// stop ends the reading goroutine. If it is blocked in a Read, stop
// interrupts it with a read deadline when the reader supports one and
// waits; otherwise it leaves the goroutine to end with that Read.
func (in *input) stop() {
	close(in.quit)
	select {
	case <-in.done:
		return
	default:
	}
	d, ok := in.r.(interface{ SetReadDeadline(time.Time) error })
	if !ok || d.SetReadDeadline(time.Now()) != nil {
		return
	}
	<-in.done
	d.SetReadDeadline(time.Time{})
}
