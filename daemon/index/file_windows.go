package index

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// oDirectory: Windows has no such open flag; openDir checks instead.
const oDirectory = 0

// LinkCount is the number of hard links of the open file f, whose
// FileInfo is fi: NumberOfLinks of its handle's information (a Windows
// FileInfo holds no link count).
func LinkCount(f *os.File, _ fs.FileInfo) (uint64, error) {
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
		return 0, fmt.Errorf("count the hard links of %s: %w", f.Name(), err)
	}
	return uint64(info.NumberOfLinks), nil
}

// linkCountAt is LinkCount of the file rel in root, whose FileInfo is fi:
// it opens the file through the root (which follows a symlink only while
// it stays inside), as a read would.
func linkCountAt(root *os.Root, rel string, fi fs.FileInfo) (uint64, error) {
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return LinkCount(f, fi)
}

// openNoFollow opens path for access without following a reparse point
// (a symlink or a junction) at its end, and without keeping anyone else
// from writing, renaming or deleting it meanwhile. A directory opens too.
func openNoFollow(path string, access uint32) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(longPath(path))
	if err != nil {
		return windows.InvalidHandle, err
	}
	return windows.CreateFile(p, access,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
}

// longPath makes an absolute path longer than MAX_PATH usable by
// CreateFile, which os does for itself: C:\x becomes \\?\C:\x and
// \\server\share\x becomes \\?\UNC\server\share\x.
func longPath(path string) string {
	const maxPath = 248 // a directory's limit, the lower one
	switch {
	case len(path) < maxPath, strings.HasPrefix(path, `\\?\`), strings.HasPrefix(path, `\\.\`):
		return path
	case strings.HasPrefix(path, `\\`):
		return `\\?\UNC\` + path[2:]
	case filepath.IsAbs(path):
		return `\\?\` + path
	}
	return path
}

// idOf identifies the directory at path (following a link, as Stat does)
// by its volume's serial number and its file index.
func idOf(path string) fileID {
	p, err := windows.UTF16PtrFromString(longPath(path))
	if err != nil {
		return fileID{}
	}
	h, err := windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return fileID{}
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return fileID{}
	}
	return fileID{uint64(info.VolumeSerialNumber), uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)}
}

// errReparse is why openDir refuses a directory that is a link.
var errReparse = errors.New("it is a symlink or a junction, which is not followed")

// openDir opens a directory to read it, without following a reparse
// point: a directory swapped for a symlink or a junction since its parent
// was read is not followed out of the root. The handle is checked (a
// directory, not a reparse point) and then given to os, which reads a
// directory from any handle opened with FILE_LIST_DIRECTORY.
func openDir(name string) (*os.File, error) {
	h, err := openNoFollow(name, windows.FILE_LIST_DIRECTORY|windows.FILE_READ_ATTRIBUTES|windows.SYNCHRONIZE)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	switch {
	case info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: name, Err: errReparse}
	case info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0:
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: name, Err: windows.ERROR_DIRECTORY}
	}
	return os.NewFile(uintptr(h), name), nil
}

// fileBasicInfo is FILE_BASIC_INFO: times in 100 ns since 1601 (UTC).
type fileBasicInfo struct {
	CreationTime, LastAccessTime, LastWriteTime, ChangeTime int64
	FileAttributes                                          uint32
	_                                                       uint32
}

// changeTime is the change time of the regular file at abs, not following
// a reparse point; ok is false for anything else, and where the file
// system keeps none (FAT). NTFS moves it, as Unix does ctime, on a write,
// a rename onto the name and a new link. Unlike ctime, a program may set
// it (SetFileInformationByHandle); tools that touch files set the write
// time, and a rescan after lost events is all it is used for.
func changeTime(abs string) (ctime time.Time, ok bool) {
	h, err := openNoFollow(abs, windows.FILE_READ_ATTRIBUTES)
	if err != nil {
		return time.Time{}, false
	}
	defer windows.CloseHandle(h)
	var info fileBasicInfo
	if err := windows.GetFileInformationByHandleEx(h, windows.FileBasicInfo, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		return time.Time{}, false
	}
	const notRegular = windows.FILE_ATTRIBUTE_DIRECTORY | windows.FILE_ATTRIBUTE_REPARSE_POINT | windows.FILE_ATTRIBUTE_DEVICE
	if info.FileAttributes&notRegular != 0 || info.ChangeTime <= 0 {
		return time.Time{}, false
	}
	ft := windows.Filetime{LowDateTime: uint32(info.ChangeTime), HighDateTime: uint32(info.ChangeTime >> 32)}
	return time.Unix(0, ft.Nanoseconds()), true
}
