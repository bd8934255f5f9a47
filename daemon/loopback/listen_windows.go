package loopback

import (
	"errors"

	"golang.org/x/sys/windows"
)

// addrInUse reports whether a listen failed because another socket holds
// the address: Winsock's own error (syscall.EADDRINUSE is not it).
func addrInUse(err error) bool { return errors.Is(err, windows.WSAEADDRINUSE) }
