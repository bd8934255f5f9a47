package loopback

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Connections that idle cost flyd a file descriptor each, and anyone on
// the machine can open TCP connections without a token. So idle
// keep-alive connections are closed after a short idle time on both
// listeners (the daemon sets it), and the TCP listener holds at most connCap connections, half the
// process's descriptor limit: the other half stays for the Unix socket
// (the user's own clients), runs, upstreams, the index and the store,
// whatever happens on TCP.

// connCap is how many connections the TCP listener holds at once: half
// the process's descriptor limit (fileLimit, per OS).
func connCap() int {
	return min(max(fileLimit()/2, 16), 8192)
}

// capListener closes a connection at once when cap are open already, so
// that nobody can take the process's descriptors through it. A refusal is
// logged at most once a minute.
type capListener struct {
	net.Listener
	cap  int
	open atomic.Int64
	log  *slog.Logger

	mu      sync.Mutex
	refused int       // since the last log line
	logged  time.Time // when the last one was written
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= int64(l.cap) {
			return &cappedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		c.Close()
		l.mu.Lock()
		l.refused++
		if time.Since(l.logged) > time.Minute {
			l.log.Warn("loopback connections refused: too many open", "cap", l.cap, "refused", l.refused)
			l.refused, l.logged = 0, time.Now()
		}
		l.mu.Unlock()
	}
}

// cappedConn gives its slot back once, when it is closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// MaxConns is how many connections a listener from Limit holds at once.
func MaxConns() int { return connCap() }

// Limit returns ln holding at most half the process's descriptor limit of
// connections at once, and that cap.
func Limit(ln net.Listener, log *slog.Logger) (net.Listener, int) {
	n := connCap()
	return &capListener{Listener: ln, cap: n, log: log}, n
}
