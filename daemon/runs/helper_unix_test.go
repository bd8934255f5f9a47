//go:build unix

package runs

import "syscall"

// grandchildAttr is how the "tree" helper starts its child: as any.
func grandchildAttr() *syscall.SysProcAttr { return nil }
