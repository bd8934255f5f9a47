package store

import (
	"os"

	"golang.org/x/sys/windows"
)

// replaceFile moves tmp over path (MoveFileEx, replacing it), and returns
// once the move is on the disk (MOVEFILE_WRITE_THROUGH): Windows has no
// directory to sync. It refuses to replace a file that is open, which the
// caller closes first; NTFS logs the replacement, so that a crash leaves
// one file or the other.
func replaceFile(tmp, path string) error {
	from, err := windows.UTF16PtrFromString(tmp)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	to, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	if err := windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}
