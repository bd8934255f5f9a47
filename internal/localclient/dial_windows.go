package localclient

import (
	"errors"
	"io/fs"
	"syscall"
)

// wsaeconnrefused is Winsock's WSAECONNREFUSED, which the syscall
// package does not name: an AF_UNIX socket file without a listener.
const wsaeconnrefused = syscall.Errno(10061)

// noDaemon reports whether a dial error means that nothing listens on
// the socket: it does not exist, or nobody accepts on it.
func noDaemon(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, wsaeconnrefused)
}
