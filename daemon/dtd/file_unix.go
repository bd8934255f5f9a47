//go:build unix

package dtd

import "syscall"

// oNoFollow makes an open of a symlink fail.
const oNoFollow = syscall.O_NOFOLLOW
