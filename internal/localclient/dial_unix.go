//go:build !windows

package localclient

import (
	"errors"
	"syscall"
)

// noDaemon reports whether a dial error means that nothing listens on
// the socket: it does not exist, or nobody accepts on it.
func noDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}
