//go:build unix

package index

import (
	"errors"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// dirCache keeps the directory of the last file a worker read open:
// files come in path order, so mostly from the same directory. The
// directory is opened through the workspace's root (which refuses any
// way out of it); its files are then opened by their single-element
// names relative to it, without following a symlink, with raw system
// calls: openat, fstat, read and close, four a file, which is what makes
// the first search of a workspace as fast as a tool made for it. A
// symlink (the root may serve one that stays inside it) is read through
// the root instead.
type dirCache struct {
	dir    string
	f      *os.File // dir, when opened through the root
	fd     int      // dir's fd, or -1
	parent string
	pf     *os.File // parent, opened through the root
}

// openDir returns the fd of rel's directory, or -1. A directory beside
// the last one is opened relative to their parent, kept open too (one
// openat instead of a walk from the root); any other through the root.
func (d *dirCache) openDir(root *os.Root, rel string) int {
	dir := path.Dir(rel)
	if dir == d.dir && d.dir != "" {
		return d.fd
	}
	d.closeDir()
	d.dir, d.fd = dir, -1
	parent := path.Dir(dir)
	if dir == "." || parent != d.parent || d.pf == nil {
		if d.pf != nil {
			d.pf.Close()
		}
		d.parent, d.pf = parent, nil
		if dir != "." {
			if f, err := openDirIn(root, parent); err == nil {
				d.pf = f
			}
		}
	}
	if d.pf != nil {
		fd, err := unix.Openat(int(d.pf.Fd()), path.Base(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			d.fd = fd
			return fd
		}
	}
	f, err := openDirIn(root, dir) // a symlink inside the root, or the root itself
	if err != nil {
		return -1
	}
	d.f = f
	d.fd = int(f.Fd())
	return d.fd
}

// closeDir closes the directory, not its parent.
func (d *dirCache) closeDir() {
	switch {
	case d.f != nil:
		d.f.Close()
	case d.fd >= 0 && d.dir != "":
		closeFd(d.fd)
	}
	d.dir, d.f, d.fd = "", nil, -1
}

func (d *dirCache) close() {
	d.closeDir()
	if d.pf != nil {
		d.pf.Close()
	}
	d.parent, d.pf = "", nil
}

// read returns the contents of the workspace file rel, a copy the caller
// may keep, or why it was skipped: not a regular file with one link (as
// reads are served), or over limit bytes.
func (d *dirCache) read(root *os.Root, rel string, limit int64) ([]byte, skipReason) {
	dirfd := d.openDir(root, rel)
	if dirfd < 0 {
		return nil, skipOther
	}
	fd, err := unix.Openat(dirfd, path.Base(rel), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Openat(dirfd, path.Base(rel), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return readThroughRoot(root, rel, limit)
	}
	if err != nil {
		return nil, skipOther
	}
	defer closeFd(fd)
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG || uint64(st.Nlink) > 1 {
		return nil, skipOther
	}
	if st.Size > limit {
		return nil, skipLarge
	}
	// One read a file, into what the cache keeps: a buffer one byte
	// larger than the file says, at its end, that it has not grown.
	buf := make([]byte, st.Size+1)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, skipOther
		}
		if m == 0 {
			break
		}
		n += m
	}
	if int64(n) > limit {
		return nil, skipLarge
	}
	return buf[:n:n], skipNone
}
