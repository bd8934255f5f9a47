// Package ipc is the transport of flyd's local endpoint on each
// operating system: a Unix socket, or a named pipe on Windows. It listens,
// dials, tells a dial that found nobody listening from other failures,
// and says who is on the other end of a connection (the peer's user and
// pid, from the kernel: SO_PEERCRED, LOCAL_PEERCRED, or the pipe client's
// process token). It owns the operating system's calls, not the policy:
// daemon/endpoint decides whom flyd serves; a dial on Windows refuses a
// pipe that is not this user's (its owner) before the caller sends
// anything, which is the pipe's form of paths.CheckSocketTrust.
//
// It imports the standard library, golang.org/x/sys and internal/owner:
// the shim links it.
package ipc

import (
	"context"
	"net"

	"github.com/fly-dev/fly/internal/owner"
)

// Listen listens on the endpoint name (a socket path, or a pipe name on
// Windows). A stale Unix socket there is replaced: the caller must hold
// the endpoint's lock, which makes it known to be stale. Closing the
// listener does not remove the socket file; the caller does, while it
// still holds the lock.
func Listen(name string) (net.Listener, error) { return listen(name) }

// Dial connects to the endpoint name. On Windows it refuses a pipe that
// another user owns (one made under flyd's name while flyd was not
// running), before anything is sent on it.
func Dial(ctx context.Context, name string) (net.Conn, error) { return dial(ctx, name) }

// NoListener reports whether a Dial error means that nothing listens at
// the endpoint: no socket or pipe of that name, or nobody accepting.
func NoListener(err error) bool { return noListener(err) }

// Peer is the process on the other end of a connection Listen accepted.
type Peer struct {
	User owner.User
	PID  int // 0 where the OS does not tell
}

// PeerOf asks the kernel who is on the other end of c, a connection
// Listen's listener accepted.
func PeerOf(c net.Conn) (Peer, error) { return peerOf(c) }
