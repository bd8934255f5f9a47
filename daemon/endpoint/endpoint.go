// Package endpoint is flyd's local endpoint: the single-instance lock,
// the socket's directory, the listener, and the check that every peer is
// this user (owner.User), before anything is read from it. The transport
// and what the kernel says of a peer are internal/ipc's (a Unix socket
// and SO_PEERCRED or LOCAL_PEERCRED; a named pipe and its client's token
// on Windows). It owns who may connect, not what is served.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/lockfile"
	"github.com/fly-dev/fly/internal/owner"
)

// ErrAlreadyRunning is returned by Acquire when another flyd holds the
// lock.
var ErrAlreadyRunning = errors.New("flyd already running")

// Lock is the exclusive lock that makes flyd single-instance.
// The holder's pid is written into the file so that a second flyd can
// name it.
type Lock struct{ l *lockfile.File }

// Acquire takes the exclusive lock at path without waiting.
func Acquire(path string) (*Lock, error) {
	l, err := lockfile.TryLock(path)
	if errors.Is(err, lockfile.ErrLocked) {
		defer l.Unlock()
		b := make([]byte, 32)
		n, _ := l.File().ReadAt(b, 0)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil {
			return nil, fmt.Errorf("%w (pid %d)", ErrAlreadyRunning, pid)
		}
		return nil, fmt.Errorf("%w (lock %s is held)", ErrAlreadyRunning, path)
	}
	if err != nil {
		return nil, err
	}
	// The pid is only for the message a second flyd prints; failing to
	// write it does not weaken the lock.
	if err := l.File().Truncate(0); err == nil {
		_, _ = l.File().WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{l: l}, nil
}

// Release drops the lock. The file stays: removing it would race with a
// new flyd that already opened it.
func (l *Lock) Release() {
	_ = l.l.File().Truncate(0)
	_ = l.l.Unlock()
}

// Open prepares flyd's endpoint at socket and listens on it. On Unix the
// socket's directory is checked (PrepareDir), the socket's own lock taken
// (a flyd with another state directory but this socket must not unlink a
// live daemon's socket) and a stale socket replaced; on Windows the pipe's
// first instance holds the name. Another flyd there is ErrAlreadyRunning.
// release, called once the listener is closed, removes the socket and
// drops its lock.
func Open(socket string) (ln net.Listener, release func(), err error) { return open(socket) }

// Listen replaces a stale socket and listens (ipc.Listen). The caller must
// hold the socket's lock: only then is an existing socket known to be
// stale.
func Listen(socket string) (net.Listener, error) { return ipc.Listen(socket) }

// Peer is the process on the other end of a connection.
type Peer = ipc.Peer

type peerKey struct{}

// PeerFrom returns the peer ConnContext stored in a request context.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// ConnContext stores the checked peer of c, a connection a PeerListener
// accepted, in ctx (http.Server.ConnContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		return context.WithValue(ctx, peerKey{}, pc.peer)
	}
	return ctx
}

// PeerListener accepts only connections whose peer runs as User. Others
// are closed at once and handed to Refuse (to log); they never reach
// HTTP.
type PeerListener struct {
	net.Listener
	User   owner.User
	Refuse func(p Peer, err error)
}

// peerConn is an accepted connection with its checked peer.
type peerConn struct {
	net.Conn
	peer Peer
}

func (l *PeerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p, err := ipc.PeerOf(c)
		if err == nil && p.User == l.User {
			return &peerConn{Conn: c, peer: p}, nil
		}
		l.Refuse(p, err)
		c.Close()
	}
}
