package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/wire"
)

// Bounds of the start-and-retry loop.
const (
	firstBackoff = 20 * time.Millisecond
	maxBackoff   = 500 * time.Millisecond

	// exitGrace is how long the shim keeps dialing after the flyd it
	// started exited: that flyd may have lost a start race to another
	// shim's, which is about to answer.
	exitGrace = 2 * time.Second

	// tailLines is how much of flyd.log an error shows.
	tailLines = 10
)

// conn is one WebSocket session with flyd.
type conn struct {
	ws         *websocket.Conn
	maxMessage int64        // the largest message flyd accepts; 0 if it did not say
	writing    atomic.Int64 // when the write in progress began (Unix ns); 0 when none
}

// unixClient returns an HTTP client whose every connection goes to the
// Unix socket at path, whatever the URL's host.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		// Proxy is nil: a proxy from the environment never applies.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			// Nothing (the editor's environment, its workspace) is sent to
			// a socket that another user could have put there.
			if err := paths.CheckSocketTrust(path); err != nil {
				return nil, err
			}
			return ipc.Dial(ctx, path)
		},
	}}
}

// connect opens the first session with flyd, starting flyd first when
// nothing listens on the socket and the Config allows it.
func (r *Relay) connect(ctx context.Context) (*conn, error) {
	c, err := r.dial(ctx)
	if err == nil || !noListener(err) {
		return c, err
	}
	if !r.canStart() {
		return nil, fmt.Errorf("%w: nothing listens on %s", ErrNotRunning, r.cfg.Socket)
	}
	return r.start(ctx)
}

// canStart reports whether the relay may start flyd.
func (r *Relay) canStart() bool { return r.cfg.Start != nil || r.cfg.Flyd != nil }

// redial gets a lost connection back: it dials with backoff until flyd
// answers or ctx is done, and gives up at the ReconnectTimeout, or at once
// when flyd speaks another protocol version. Once nothing has listened
// for restartAfter, it starts flyd (at most once per StartTimeout), as
// connect does.
func (r *Relay) redial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReconnectTimeout)
	defer cancel()
	began := time.Now()
	var last error
	var lastStart time.Time
	delay := reconnectFirstBackoff
	for {
		c, err := r.dial(ctx)
		if err == nil {
			return c, nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
		var ve *versionError
		if errors.As(err, &ve) {
			return nil, err
		}
		if noListener(err) && r.canStart() && time.Since(began) >= r.restartAfter &&
			(lastStart.IsZero() || time.Since(lastStart) >= r.cfg.StartTimeout) {
			lastStart = time.Now()
			c, err := r.start(ctx)
			if err == nil {
				return c, nil
			}
			if ctx.Err() != nil {
				break
			}
			if errors.As(err, &ve) {
				return nil, err
			}
			last = err
			r.log.Warn("could not restart flyd; still trying", keyErr, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		delay = min(2*delay, reconnectMaxBackoff)
	}
	if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
		return nil, err // Run is returning
	}
	return nil, fmt.Errorf("flyd did not come back on %s within %v: %w", r.cfg.Socket, r.cfg.ReconnectTimeout, last)
}

// versionError is a dial's error when flyd speaks another protocol
// version: retrying cannot help.
type versionError struct{ err error }

func (e *versionError) Error() string { return e.err.Error() }
func (e *versionError) Unwrap() error { return e.err }

// noListener reports whether a dial failed because no daemon listens on
// the socket, as opposed to one that answered badly.
func noListener(err error) bool { return ipc.NoListener(err) }

// dial makes one attempt to open a session: the WebSocket handshake on
// RouteMCP, bounded by StartTimeout, and the version check.
func (r *Relay) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	h := http.Header{}
	h.Set(wire.HeaderVersion, wire.VersionHeader())
	h.Set(wire.HeaderWorkspace, url.QueryEscape(r.cfg.Workspace))
	if r.cfg.Env != "" {
		h.Set(wire.HeaderEnv, r.cfg.Env)
	}
	u := "ws://flyd" + wire.RouteMCP
	q := url.Values{}
	for _, t := range r.cfg.Tools {
		q.Add("tools", t)
	}
	for _, t := range r.cfg.Disable {
		q.Add("disable", t)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:   r.client,
		HTTPHeader:   h,
		Subprotocols: []string{wire.Subprotocol},
	})
	if err != nil {
		return nil, r.dialError(ctx, resp, err)
	}
	if err := wire.CheckPeer("flyctl", "flyd", resp.Header.Get(wire.HeaderVersion)); err != nil {
		ws.Close(websocket.StatusPolicyViolation, "protocol version mismatch")
		return nil, &versionError{err}
	}
	if ws.Subprotocol() != wire.Subprotocol {
		ws.Close(websocket.StatusPolicyViolation, "subprotocol "+wire.Subprotocol+" required")
		return nil, fmt.Errorf("flyd at %s did not accept the WebSocket subprotocol %q", r.cfg.Socket, wire.Subprotocol)
	}
	if r.cfg.OnVersion != nil {
		r.cfg.OnVersion(resp.Header.Get(wire.HeaderVersion))
	}
	ws.SetReadLimit(readLimit)
	c := &conn{ws: ws}
	if s := resp.Header.Get(wire.HeaderMaxMessage); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			r.log.Warn("ignored an invalid header from flyd", keyHeader, wire.HeaderMaxMessage, keyValue, s)
		} else {
			c.maxMessage = n
		}
	}
	return c, nil
}

// dialError explains a failed handshake. The error still wraps err, so
// that noListener sees through it.
func (r *Relay) dialError(ctx context.Context, resp *http.Response, err error) error {
	if resp != nil {
		// flyd answered, but not with a WebSocket: a version mismatch is
		// the most useful thing to report, then what it said.
		if verr := wire.CheckPeer("flyctl", "flyd", resp.Header.Get(wire.HeaderVersion)); verr != nil {
			return &versionError{fmt.Errorf("flyd at %s refused the session (%s): %w", r.cfg.Socket, resp.Status, verr)}
		}
		var body []byte
		if resp.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		}
		err := fmt.Errorf("flyd at %s refused the session: %s", r.cfg.Socket, resp.Status)
		if s := strings.TrimSpace(string(body)); s != "" {
			err = fmt.Errorf("flyd at %s refused the session: %s: %s", r.cfg.Socket, resp.Status, truncate(s, maxReason))
		}
		if resp.StatusCode == http.StatusPreconditionFailed {
			// flyd checked this shim's version header and refused it.
			return &versionError{err}
		}
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("flyd at %s accepted the connection but did not complete the handshake within %v: %w",
			r.cfg.Socket, r.cfg.StartTimeout, err)
	}
	return fmt.Errorf("connect to flyd at %s: %w", r.cfg.Socket, err)
}

// start starts flyd and dials it, holding the start lock throughout so
// that shims starting together start one flyd. Under the lock it dials
// once more (the lock's previous holder may have started flyd), then tries
// Config.Start, then Config.Flyd.
func (r *Relay) start(ctx context.Context) (*conn, error) {
	if err := owner.MkdirPrivate(r.cfg.StateDir); err != nil {
		return nil, fmt.Errorf("start flyd: %w", err)
	}
	lock := filepath.Join(r.cfg.StateDir, startLockName)
	// The holder's worst case: a dial, Start and its dials, a detached
	// start and its dials.
	lctx, cancel := context.WithTimeout(ctx, 4*r.cfg.StartTimeout)
	unlock, err := lockFile(lctx, lock)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start flyd: %w", err)
	}
	defer unlock()
	if c, err := r.dial(ctx); err == nil || !noListener(err) {
		if err == nil {
			r.log.Info("flyd answered once the start lock was free: another flyctl started it", keyLock, lock)
		}
		return c, err
	}
	var startErr error
	if r.cfg.Start != nil {
		sctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
		startErr = r.cfg.Start(sctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case startErr == nil:
			r.log.Info("started the flyd service", keySocket, r.cfg.Socket)
			c, err := r.dialStarted(ctx, nil)
			if err == nil || r.cfg.Flyd == nil || !errors.Is(err, errNoAnswer) {
				return c, err
			}
			r.log.Warn("the flyd service did not answer; starting flyd directly", keyErr, err)
		case errors.Is(startErr, ErrNoService):
			r.log.Debug("no flyd service to start", keyErr, startErr)
		default:
			r.log.Warn("could not start the flyd service", keyErr, startErr)
		}
	}
	if r.cfg.Flyd == nil {
		return nil, fmt.Errorf("%w: nothing listens on %s, and flyctl cannot start it: %v", ErrNotRunning, r.cfg.Socket, startErr)
	}
	st, err := r.startFlyd()
	if err != nil {
		return nil, err
	}
	return r.dialStarted(ctx, st)
}

// errNoAnswer marks dialStarted's error when nothing answered in time.
var errNoAnswer = errors.New("no answer")

// dialStarted dials with backoff after a start until flyd answers, the
// start timeout passes or, for a flyd this shim started (st is not nil),
// it has exited for exitGrace.
func (r *Relay) dialStarted(ctx context.Context, st *started) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	var exited chan error
	if st != nil {
		exited = st.exited
	}
	var exitErr error
	var exitedAt time.Time
	delay := firstBackoff
	for {
		c, err := r.dial(dctx)
		switch {
		case err == nil:
			return c, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case dctx.Err() != nil:
			if !exitedAt.IsZero() {
				return nil, st.exitedError(r.cfg.Socket, exitErr)
			}
			if st == nil {
				return nil, fmt.Errorf("the flyd service did not answer on %s within %v: %w", r.cfg.Socket, r.cfg.StartTimeout, errNoAnswer)
			}
			return nil, st.timeoutError(r.cfg.Socket, r.cfg.StartTimeout)
		case !noListener(err):
			return nil, err
		case !exitedAt.IsZero() && time.Since(exitedAt) >= exitGrace:
			return nil, st.exitedError(r.cfg.Socket, exitErr)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-dctx.Done(): // the next dial fails at once and reports
		case exitErr = <-exited:
			exited = nil
			exitedAt = time.Now()
			r.log.Warn("flyd exited before answering; still dialing in case another flyd answers",
				keyPID, st.pid, keyErr, exitStatus(exitErr))
		}
		t.Stop()
		delay = min(2*delay, maxBackoff)
	}
}

// started is a flyd this shim started.
type started struct {
	pid    int
	log    string     // its log file
	offset int64      // the log's size before the start: what it wrote follows
	exited chan error // receives cmd.Wait's result once
}

// startFlyd starts Config.Flyd detached: in its own session, with stdin
// from /dev/null, its output appended to flyd.log in the state directory
// and the shim's environment. It does not wait for flyd to answer.
//
// The daemon is meant to outlive the shim. A goroutine waits for it, so
// that it is reaped if it exits while the shim runs; that goroutine ends
// when flyd exits, and it is the one goroutine Run does not wait for.
func (r *Relay) startFlyd() (*started, error) {
	p := paths.Paths{StateDir: r.cfg.StateDir, Socket: r.cfg.Socket}
	logf, err := os.OpenFile(p.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start flyd: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	offset, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("start flyd: %w", err)
	}
	cmd := exec.Command(r.cfg.Flyd[0], r.cfg.Flyd[1:]...)
	// Not the editor's project: a daemon's working directory is held open
	// for as long as it runs (on Windows, the folder could not be removed
	// or renamed).
	cmd.Dir = r.cfg.StateDir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := proc.StartDetached(cmd); err != nil {
		return nil, fmt.Errorf("start flyd: %w", err)
	}
	st := &started{pid: cmd.Process.Pid, log: p.Log(), offset: offset, exited: make(chan error, 1)}
	r.log.Info("started flyd", keyPID, st.pid, keyLog, st.log, keySocket, r.cfg.Socket)
	// The reaper (see above). The channel is buffered: it never blocks.
	go func() { st.exited <- cmd.Wait() }()
	return st, nil
}

func (st *started) timeoutError(socket string, timeout time.Duration) error {
	return fmt.Errorf("flyd did not answer on %s within %v; its log is %s%s",
		socket, timeout, st.log, logTail(st.log, st.offset, tailLines))
}

func (st *started) exitedError(socket string, exitErr error) error {
	return fmt.Errorf("flyd exited (%s) before answering on %s; its log is %s%s",
		exitStatus(exitErr), socket, st.log, logTail(st.log, st.offset, tailLines))
}

// exitStatus describes how a process ended from cmd.Wait's error.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// logTail formats the last n lines written to the log at path after
// offset, one per indented line after a colon, for an error message.
func logTail(path string, offset int64, n int) string {
	const window = 64 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf(" (cannot read it: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf(" (cannot read it: %v)", err)
	}
	start := max(offset, fi.Size()-window)
	b := make([]byte, max(fi.Size()-start, 0))
	k, _ := f.ReadAt(b, start)
	b = bytes.TrimRight(b[:k], "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return " (flyd wrote nothing to it)"
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var sb strings.Builder
	sb.WriteString(", which ends with:")
	for _, l := range lines {
		sb.WriteString("\n    ")
		sb.WriteString(truncate(strings.TrimRight(l, "\r"), 500))
	}
	return sb.String()
}
