package runs

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// grandchildAttr is how the "tree" helper starts its child: with no
// console. One that shared the run's console would keep it, and the
// console host Wine starts for it (which holds the run's output pipes),
// alive: the run's output would not end with its leader.
func grandchildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.DETACHED_PROCESS}
}
