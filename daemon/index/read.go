package index

import (
	"os"
	"path/filepath"
	"syscall"
)

// readThroughRoot reads rel as reads are served, through the root, which
// follows a symlink only while it stays inside.
func readThroughRoot(root *os.Root, rel string, limit int64) ([]byte, skipReason) {
	f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, skipOther
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !singleLink(f, fi) {
		return nil, skipOther
	}
	if fi.Size() > limit {
		return nil, skipLarge
	}
	buf := make([]byte, fi.Size()+1)
	n, _ := readFull(f, buf)
	if int64(n) > limit {
		return nil, skipLarge
	}
	return buf[:n], skipNone
}

// readFull reads into buf until it is full or the file ends.
func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// openDirIn opens the directory rel through root without blocking: a
// FIFO put where a directory was fails instead of hanging the open.
func openDirIn(root *os.Root, rel string) (*os.File, error) {
	return root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|oDirectory|syscall.O_NONBLOCK, 0)
}
