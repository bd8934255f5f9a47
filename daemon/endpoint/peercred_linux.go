package endpoint

import (
	"fmt"
	"net"

	"github.com/fly-dev/fly/internal/owner"
	"golang.org/x/sys/unix"
)

// peerCred reads SO_PEERCRED of a Unix-socket connection.
func peerCred(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, fmt.Errorf("not a unix connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if serr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return Peer{User: owner.UID(int(cred.Uid)), PID: int(cred.Pid)}, nil
}
