//go:build unix

package index

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errNoStat: a FileInfo without the system's stat, which holds the count.
var errNoStat = errors.New("the file system gave no link count")

// oDirectory makes an open fail on anything but a directory.
const oDirectory = syscall.O_DIRECTORY

// LinkCount is the number of hard links of the open file f, whose
// FileInfo (f.Stat) is fi: on Unix, fi holds it.
func LinkCount(_ *os.File, fi fs.FileInfo) (uint64, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errNoStat
	}
	return uint64(st.Nlink), nil
}

// linkCountAt is LinkCount of the file rel in root, whose FileInfo (from
// the root's Stat or Lstat) is fi: on Unix, fi holds it.
func linkCountAt(_ *os.Root, _ string, fi fs.FileInfo) (uint64, error) {
	return LinkCount(nil, fi)
}

func idOf(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(st.Dev), uint64(st.Ino)}
	}
	return fileID{}
}

// openDir opens a directory to read it. O_NOFOLLOW: a directory swapped
// for a symlink since its parent was read is not followed out of the root.
// It goes through os.NewFile rather than os.Open, which on Linux also tries
// the descriptor with the poller: five more system calls per directory,
// a third of the cost of reading a small one.
func openDir(name string) (*os.File, error) {
	const flags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Open(name, flags, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(name, flags, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// changeTime is the status change time (ctime) of the regular file at
// abs, not following a symlink; ok is false for anything else. A ctime in
// whole seconds is taken as up to 2 s later (see changedSince).
func changeTime(abs string) (ctime time.Time, ok bool) {
	var st unix.Stat_t
	err := unix.Lstat(abs, &st)
	for err == unix.EINTR {
		err = unix.Lstat(abs, &st)
	}
	if err != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		return time.Time{}, false
	}
	ctime = time.Unix(st.Ctim.Unix())
	if st.Ctim.Nsec == 0 {
		ctime = ctime.Add(2 * time.Second)
	}
	return ctime, true
}
