package daemon

import (
	"fmt"
	"net"

	"github.com/fly-dev/fly/internal/owner"
	"golang.org/x/sys/unix"
)

// peerCred reads SO_PEERCRED of a Unix-socket connection.
func peerCred(c net.Conn) (peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{}, fmt.Errorf("not a unix connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if serr != nil {
		return peer{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return peer{User: owner.UID(int(cred.Uid)), PID: int(cred.Pid)}, nil
}
