package index

import "os"

// dirCache on Windows keeps nothing: each file is read through the root
// (the Unix fast path of read_unix.go uses openat).
type dirCache struct{}

func (d *dirCache) read(root *os.Root, rel string, limit int64) ([]byte, skipReason) {
	return readThroughRoot(root, rel, limit)
}

func (d *dirCache) close() {}
