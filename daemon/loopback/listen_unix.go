//go:build unix

package loopback

import (
	"errors"
	"syscall"
)

// addrInUse reports whether a listen failed because another socket holds
// the address.
func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
