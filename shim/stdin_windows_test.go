package shim

import (
	"crypto/rand"
	"encoding/hex"
	"os"

	"golang.org/x/sys/windows"
)

// stdinPipe is the pipe a test's relay reads as its stdin: on Windows an
// overlapped pipe, which supports read deadlines, so that Run can end a
// pending read when it returns early. (An editor's anonymous pipe does
// not; there the read ends when the shim's process does, see Run.)
func stdinPipe() (r, w *os.File, err error) {
	b := make([]byte, 8)
	rand.Read(b)
	name, _ := windows.UTF16PtrFromString(`\\.\pipe\fly-test-stdin-` + hex.EncodeToString(b))
	rh, err := windows.CreateNamedPipe(name, windows.PIPE_ACCESS_INBOUND|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS, 1, 64<<10, 64<<10, 0, nil)
	if err != nil {
		return nil, nil, err
	}
	wh, err := windows.CreateFile(name, windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		windows.CloseHandle(rh)
		return nil, nil, err
	}
	return os.NewFile(uintptr(rh), "stdin"), os.NewFile(uintptr(wh), "stdin-writer"), nil
}
