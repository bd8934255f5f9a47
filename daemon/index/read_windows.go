package index

import (
	"os"
	"path"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// dirCache keeps the directory of the last file a worker read open: files
// come in path order, so mostly from the same directory. The directory is
// opened through the workspace's root (which refuses any way out of it);
// its files are then opened by their single-element names relative to its
// handle (NtCreateFile with a root directory, Windows's openat), without
// following a reparse point, and read with the handle's own calls. A
// symlink or a junction (the root may serve one that stays inside it) is
// read through the root instead.
type dirCache struct {
	dir string
	f   *os.File // dir, opened through the root; nil if it could not be
}

// openDir returns rel's directory, or nil.
func (d *dirCache) openDir(root *os.Root, rel string) *os.File {
	dir := path.Dir(rel)
	if dir == d.dir && d.dir != "" {
		return d.f
	}
	d.close()
	d.dir = dir
	if f, err := openDirIn(root, dir); err == nil {
		d.f = f
	}
	return d.f
}

func (d *dirCache) close() {
	if d.f != nil {
		d.f.Close()
	}
	d.dir, d.f = "", nil
}

// read returns the contents of the workspace file rel, a copy the caller
// may keep, or why it was skipped: not a regular file with one link (as
// reads are served), or over limit bytes.
func (d *dirCache) read(root *os.Root, rel string, limit int64) ([]byte, skipReason) {
	dir := d.openDir(root, rel)
	name := path.Base(rel)
	if dir == nil || strings.ContainsAny(name, `\:`) {
		return nil, skipOther
	}
	h, err := openFileAt(windows.Handle(dir.Fd()), name)
	if err != nil {
		return nil, skipOther
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return nil, skipOther
	}
	const notRegular = windows.FILE_ATTRIBUTE_DIRECTORY | windows.FILE_ATTRIBUTE_DEVICE
	switch {
	case info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		return readThroughRoot(root, rel, limit)
	case info.FileAttributes&notRegular != 0 || info.NumberOfLinks != 1:
		return nil, skipOther
	}
	size := int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow)
	if size > limit {
		return nil, skipLarge
	}
	// One read a file, into what the cache keeps: a buffer one byte
	// larger than the file says, at its end, that it has not grown.
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		var m uint32
		if err := windows.ReadFile(h, buf[n:], &m, nil); err != nil {
			if err == windows.ERROR_HANDLE_EOF {
				break
			}
			return nil, skipOther
		}
		if m == 0 {
			break
		}
		n += int(m)
	}
	if int64(n) > limit {
		return nil, skipLarge
	}
	return buf[:n:n], skipNone
}

// openFileAt opens the file name in the directory dir for reading, without
// following a reparse point, and without keeping anyone else from writing,
// renaming or deleting it meanwhile.
func openFileAt(dir windows.Handle, name string) (windows.Handle, error) {
	objName, err := windows.NewNTUnicodeString(name)
	if err != nil {
		return windows.InvalidHandle, err
	}
	oa := windows.OBJECT_ATTRIBUTES{RootDirectory: dir, ObjectName: objName, Attributes: windows.OBJ_CASE_INSENSITIVE}
	oa.Length = uint32(unsafe.Sizeof(oa))
	var h windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&h, windows.FILE_GENERIC_READ, &oa, &iosb, nil, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, windows.FILE_OPEN,
		windows.FILE_NON_DIRECTORY_FILE|windows.FILE_SYNCHRONOUS_IO_NONALERT|windows.FILE_OPEN_REPARSE_POINT, 0, 0)
	if err != nil {
		return windows.InvalidHandle, err
	}
	return h, nil
}
