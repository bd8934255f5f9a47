package daemon

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads SO_PEERCRED of a Unix-socket connection.
func peerCred(c net.Conn) (peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{UID: -1}, fmt.Errorf("not a unix connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{UID: -1}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{UID: -1}, err
	}
	if serr != nil {
		return peer{UID: -1}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return peer{UID: int(cred.Uid), PID: int(cred.Pid)}, nil
}
