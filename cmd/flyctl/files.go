package main

import (
	"os"
	"path/filepath"
)

// writeFileAtomic replaces name with data through a temporary file in
// the same directory and a rename, so a reader never sees half a file.
// A symlink is followed: its target is replaced, not the link. The mode
// of an existing file is kept.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	if target, err := filepath.EvalSymlinks(name); err == nil {
		name = target
	}
	if fi, err := os.Stat(name); err == nil {
		perm = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
