package lockfile

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// The locked range lies far past any content: Windows locks are
// mandatory, and a reader must still read the holder's pid at offset 0.
const lockOffsetHigh = 0x7fffffff

// lock takes an exclusive LockFileEx lock without waiting.
func lock(f *os.File) error {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return ErrLocked
	}
	return err
}

func unlock(f *os.File) {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
