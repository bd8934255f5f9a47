package ipc

import (
	"fmt"
	"net"

	"github.com/fly-dev/fly/internal/owner"
	"golang.org/x/sys/unix"
)

// peerOf reads SO_PEERCRED of a Unix-socket connection.
func peerOf(c net.Conn) (Peer, error) {
	raw, err := rawConn(c)
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
