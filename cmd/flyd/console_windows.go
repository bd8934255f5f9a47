package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// envUsage is the environment part of flyd's usage.
const envUsage = `  FLY_SOCKET      named pipe, or a path naming one (default \\.\pipe\fly-<your SID>)
  FLY_STATE_DIR   state directory (default %LOCALAPPDATA%\fly)
`

var freeConsole = windows.NewLazySystemDLL("kernel32.dll").NewProc("FreeConsole")

// detachConsole leaves the console flyd was given, as syncthing's
// --no-console does: started at logon from the Run key, flyd.exe (a
// console program) gets a console window of its own, which FreeConsole
// closes, being its only process. From a terminal, FreeConsole only
// detaches flyd and leaves the terminal's window alone (hiding the
// console window would hide the terminal). log then stands in for stdout
// and stderr: for os.Stdout and os.Stderr, and as the standard handles,
// which the Go runtime writes a panic's trace to.
func detachConsole(log *os.File) error {
	// With no console to leave (a detached start), FreeConsole fails:
	// that is no error here.
	if freeConsole.Find() == nil {
		freeConsole.Call()
	}
	h := windows.Handle(log.Fd())
	for _, std := range []uint32{windows.STD_OUTPUT_HANDLE, windows.STD_ERROR_HANDLE} {
		if err := windows.SetStdHandle(std, h); err != nil {
			return fmt.Errorf("make %s the standard output: %w", log.Name(), err)
		}
	}
	os.Stdout, os.Stderr = log, log
	return nil
}
