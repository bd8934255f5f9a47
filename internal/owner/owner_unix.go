//go:build unix

package owner

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func of(path string, fi fs.FileInfo) (Owner, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Owner{}, fmt.Errorf("the owner of %s: no stat information", path)
	}
	return Owner{Me: int(st.Uid) == os.Getuid(), Name: fmt.Sprintf("uid %d", st.Uid)}, nil
}

func othersCanWrite(_ string, fi fs.FileInfo) (bool, error) {
	return fi.Mode().Perm()&0o022 != 0, nil
}

func me() string { return fmt.Sprintf("uid %d", os.Getuid()) }
