package shim

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/fly-dev/fly/internal/logkey"
)

// The relay's lifecycle: its Config, New, and Run, which connects, runs
// one session per connection (session.go) and reconnects (reconnect.go)
// until the client or flyd is gone.

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
	keyErr     = logkey.Error
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

	// OnVersion, if set, is called with the HeaderVersion value of each
	// flyd the relay connects to that speaks its protocol (its release
	// may be older or newer than this build's), so that flyctl can tell
	// the user to restart an older one. It must not block for long.
	OnVersion func(header string)

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
	// Stdout). Nil discards them. What the user may have to act on is a
	// warning or an error; what went as it should (flyd started, a
	// reconnect no request noticed) is info, which flyctl mcp hides by
	// default.
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
