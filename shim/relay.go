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

	// drainTimeout bounds the wait for in-flight replies once stdin ends.
	drainTimeout = 30 * time.Second

	// readLimit is the largest message the shim accepts from flyd.
	readLimit = 256 << 20

	// keepBuffer is the largest buffer kept for reuse between messages;
	// a bigger one is dropped after use so one huge message does not pin
	// its memory for the rest of the session.
	keepBuffer = 4 << 20
)

// Attribute keys of the relay's log records.
const (
	keySocket = "socket"
	keyLog    = "log"
	keyPID    = "pid"
	keyBytes  = "bytes"
	keyLimit  = "limit"
	keyCount  = "count"
	keyErr    = "err"
	keyHeader = "header"
	keyValue  = "value"
)

// ErrNotRunning reports that nothing listens on flyd's socket and the
// relay was not allowed to start flyd (Config.Flyd is nil).
var ErrNotRunning = errors.New("flyd is not running")

// Config is what a Relay needs. The caller builds it from flags and the
// environment; the shim reads neither itself.
type Config struct {
	// Socket is flyd's Unix socket and StateDir its state directory
	// (where a started flyd logs, to flyd.log). Both come from
	// internal/paths.
	Socket, StateDir string

	// Workspace is the absolute workspace root the session is bound to.
	Workspace string

	// Env is the client's flutter-relevant environment, as encoded by
	// wire.EncodeEnv.
	Env string

	// Flyd is the argv that starts the daemon when none answers, for
	// example {"/usr/local/bin/flyd", "run"}. Nil means never start one.
	Flyd []string

	// StartTimeout bounds dialing and retrying after a start, and each
	// WebSocket handshake. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// Stdin carries the client's newline-delimited JSON-RPC messages and
	// Stdout receives flyd's, one per line. Stdout receives nothing else.
	Stdin  io.Reader
	Stdout io.Writer

	// Log receives diagnostics (it should write to stderr, never to
	// Stdout). Nil discards them.
	Log *slog.Logger
}

// Relay relays one MCP client's stdio stream to a flyd session over the
// Unix socket and back. It is created by New and used by one call to Run.
type Relay struct {
	cfg          Config
	log          *slog.Logger
	out          *lineWriter
	drainTimeout time.Duration // tests shorten it

	// client dials the socket. Its transport is closed by Run.
	client *http.Client
}

// New returns a Relay for cfg. It does no I/O: Run connects.
func New(cfg Config) *Relay {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
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
		client:       unixClient(cfg.Socket),
	}
}

// Run connects to flyd (starting it if needed and allowed) and relays
// until one of these happens:
//   - Stdin ends: Run waits until every request in flight has its reply
//     written to Stdout (at most 30s, less if flyd goes away), closes the
//     session normally and returns nil (or Stdin's read error);
//   - ctx is done: Run closes the session and returns ctx.Err();
//   - the connection to flyd fails: Run answers every request in flight
//     with a JSON-RPC error and returns an error.
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
	c, err := r.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	in := startInput(r.cfg.Stdin)
	defer in.stop()
	fl := newInflight()
	// A later change reconnects here when the session reports the
	// connection lost, replaying initialize and subscriptions.
	return r.session(ctx, c, in, fl)
}

// errStdout marks a failed write to Stdout: the client is gone.
type errStdout struct{ err error }

func (e *errStdout) Error() string { return "write to stdout: " + e.err.Error() }
func (e *errStdout) Unwrap() error { return e.err }

// session relays between in and one connection c. It returns when stdin
// ends and the replies in flight are written, when ctx is done, or when
// the connection fails; c is closed when it returns.
func (r *Relay) session(ctx context.Context, c *conn, in *input, fl *inflight) error {
	// The read loop gets its own context, so that cancelling ctx closes
	// the connection with a close frame (below) rather than abruptly.
	readCtx, cancelRead := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRead()
	readDone := make(chan error, 1)
	// Owner: every return path below waits for readDone.
	go func() { readDone <- r.fromDaemon(readCtx, c.ws, fl) }()

	// closeAndWait closes the connection and waits for the read loop.
	closeAndWait := func(code websocket.StatusCode, reason string) error {
		c.ws.Close(code, reason)
		cancelRead()
		return <-readDone
	}

	var stdinErr error
loop:
	for {
		select {
		case <-ctx.Done():
			closeAndWait(websocket.StatusGoingAway, "client going away")
			return ctx.Err()
		case err := <-readDone:
			closeAfterRead(c.ws, err)
			return r.lost(err, fl)
		case l := <-in.lines:
			if l.b != nil {
				err := r.toDaemon(ctx, c, fl, l.b)
				in.recycle(l.b)
				var se *errStdout
				switch {
				case errors.As(err, &se):
					closeAndWait(websocket.StatusGoingAway, "client going away")
					return err
				case err != nil && ctx.Err() != nil:
					closeAndWait(websocket.StatusGoingAway, "client going away")
					return ctx.Err()
				case err != nil:
					c.ws.CloseNow()
					<-readDone
					return r.lost(err, fl)
				}
			}
			if l.err != nil {
				if l.err != io.EOF {
					stdinErr = fmt.Errorf("read stdin: %w", l.err)
				}
				break loop
			}
		}
	}

	// Stdin ended: wait for the replies in flight, then close.
	timer := time.NewTimer(r.drainTimeout)
	defer timer.Stop()
	select {
	case <-fl.idle():
	case err := <-readDone:
		closeAfterRead(c.ws, err)
		var se *errStdout
		if errors.As(err, &se) || fl.len() > 0 {
			return r.lost(err, fl)
		}
		return stdinErr
	case <-timer.C:
		// Close first, so that no late reply races the error replies.
		closeAndWait(websocket.StatusNormalClosure, "")
		n := fl.fail(fmt.Sprintf("flyd did not reply within %v after the client closed its input", r.drainTimeout), r.out)
		r.log.Warn("gave up waiting for flyd's replies", keyCount, n)
		return stdinErr
	case <-ctx.Done():
		closeAndWait(websocket.StatusGoingAway, "client going away")
		return ctx.Err()
	}
	err := closeAndWait(websocket.StatusNormalClosure, "")
	var se *errStdout
	if errors.As(err, &se) {
		return err
	}
	return stdinErr
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
	n := fl.fail("flyd connection lost: "+reason+"; the request may or may not have been carried out", r.out)
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
func (r *Relay) toDaemon(ctx context.Context, c *conn, fl *inflight, line []byte) error {
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
			fl.add(m.ID)
		}
	}
	return c.ws.Write(ctx, websocket.MessageText, line)
}

// fromDaemon writes each message flyd sends to Stdout until the
// connection fails, and clears the requests those messages answer. It
// returns the read error, or an *errStdout.
func (r *Relay) fromDaemon(ctx context.Context, ws *websocket.Conn, fl *inflight) error {
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
		line, err := outLine(buf.Bytes(), &scratch)
		if err != nil {
			r.log.Error("dropped a message from flyd that is not JSON", keyBytes, buf.Len(), keyErr, err)
			continue
		}
		if err := r.out.writeLine(line); err != nil {
			return err
		}
		if msgs, _, err := classify(line); err == nil {
			for _, m := range msgs {
				if m.kind() == kindResponse {
					fl.done(m.ID)
				}
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

// fail answers every request in flight with an internal error carrying
// msg, written to out, and forgets them. It returns how many there were.
// The caller must make sure no reply from flyd can still be written.
func (f *inflight) fail(msg string, out *lineWriter) int {
	f.mu.Lock()
	ids := f.ids
	f.ids = make(map[string]json.RawMessage)
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
