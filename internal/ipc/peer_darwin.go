package ipc

import (
	"fmt"
	"net"

	"github.com/fly-dev/fly/internal/owner"
	"golang.org/x/sys/unix"
)

// peerOf reads LOCAL_PEERCRED (uid) and LOCAL_PEERPID of a Unix-socket
// connection.
func peerOf(c net.Conn) (Peer, error) {
	raw, err := rawConn(c)
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Xucred
	var pid int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if serr == nil {
			pid, _ = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return Peer{}, err
	}
	if serr != nil {
		return Peer{}, fmt.Errorf("LOCAL_PEERCRED: %w", serr)
	}
	return Peer{User: owner.UID(int(cred.Uid)), PID: pid}, nil
}
