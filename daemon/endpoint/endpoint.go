// Package endpoint is flyd's local endpoint: the single-instance lock,
// the socket's directory, the listener, and the check that every peer is
// this user (owner.User), before anything is read from it. What differs
// by OS is in its per-OS files: SO_PEERCRED on Linux, LOCAL_PEERCRED on
// macOS; on Windows the named pipe and its client's token are the Windows
// port's (peerCred refuses until then). It owns who may connect, not what
// is served.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/internal/lockfile"
	"github.com/fly-dev/fly/internal/owner"
	flypaths "github.com/fly-dev/fly/internal/paths"
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

// PrepareDir creates the socket's directory with mode 0700 and
// verifies that it is a real directory owned by this user that nobody
// else can enter.
func PrepareDir(socket string) error {
	if err := flypaths.CheckSocketPath(socket); err != nil {
		return err
	}
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory (a symlink?); remove it or set %s", dir, flypaths.EnvSocket)
	}
	o, err := owner.Of(dir, fi)
	if err != nil {
		return fmt.Errorf("check socket directory: %w", err)
	}
	if !o.Me {
		return fmt.Errorf("socket directory %s is owned by %s, not by you (%s); set %s to a directory you own", dir, o.Name, owner.Me(), flypaths.EnvSocket)
	}
	if alone, err := owner.Secret(dir, fi); err != nil || !alone {
		return fmt.Errorf("socket directory %s has mode %#o, others could reach the socket; run: chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// Listen replaces a stale socket and listens. The caller must hold
// the socket's lock: only then is an existing socket known to be stale.
func Listen(socket string) (net.Listener, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	// Close must not unlink: shutdown removes the socket itself, and only
	// while it still holds the lock.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}

// Peer is the process on the other end of a connection.
type Peer struct {
	User owner.User
	PID  int // 0 where the OS does not tell
}

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
		p, err := peerCred(c)
		if err == nil && p.User == l.User {
			return &peerConn{Conn: c, peer: p}, nil
		}
		l.Refuse(p, err)
		c.Close()
	}
}
