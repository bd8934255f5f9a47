package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/internal/lockfile"
	"github.com/fly-dev/fly/internal/owner"
	flypaths "github.com/fly-dev/fly/internal/paths"
)

// ErrAlreadyRunning is returned by Server.Run when another flyd holds the
// lock of the state directory.
var ErrAlreadyRunning = errors.New("flyd already running")

// instanceLock is the exclusive flock that makes flyd single-instance.
// The holder's pid is written into the file so that a second flyd can
// name it.
type instanceLock struct{ l *lockfile.File }

// acquireLock takes the exclusive lock at path without waiting.
func acquireLock(path string) (*instanceLock, error) {
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
	return &instanceLock{l: l}, nil
}

// release drops the lock. The file stays: removing it would race with a
// new flyd that already opened it.
func (l *instanceLock) release() {
	_ = l.l.File().Truncate(0)
	_ = l.l.Unlock()
}

// prepareSocketDir creates the socket's directory with mode 0700 and
// verifies that it is a real directory owned by this user that nobody
// else can enter.
func prepareSocketDir(socket string) error {
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

// listenUnix replaces a stale socket and listens. The caller must hold
// the socket's lock: only then is an existing socket known to be stale.
func listenUnix(socket string) (net.Listener, error) {
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

// peer is the process on the other end of a Unix-socket connection.
type peer struct {
	User owner.User
	PID  int // 0 where the OS does not tell
}

type peerKey struct{}

// peerFrom returns the peer stored by the listener in a request context.
func peerFrom(ctx context.Context) (peer, bool) {
	p, ok := ctx.Value(peerKey{}).(peer)
	return p, ok
}

// peerListener accepts only connections whose peer runs as user. Others
// are closed at once and logged; they never reach HTTP.
type peerListener struct {
	net.Listener
	user   owner.User
	refuse func(p peer, err error)
}

// peerConn is an accepted connection with its checked peer.
type peerConn struct {
	net.Conn
	peer peer
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p, err := peerCred(c)
		if err == nil && p.User == l.user {
			return &peerConn{Conn: c, peer: p}, nil
		}
		l.refuse(p, err)
		c.Close()
	}
}

// onSocket reports whether r came over the Unix socket from a peer
// checked to be this user.
func onSocket(r *http.Request) bool {
	_, ok := peerFrom(r.Context())
	return ok
}
