//go:build unix

package owner

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func of(path string, fi fs.FileInfo) (Owner, error) {
	uid, err := uidOf(path, fi)
	if err != nil {
		return Owner{}, err
	}
	return Owner{Me: uid == os.Getuid(), Name: fmt.Sprintf("uid %d", uid)}, nil
}

func uidOf(path string, fi fs.FileInfo) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("the owner of %s: no stat information", path)
	}
	return int(st.Uid), nil
}

// User is a user of this machine: a uid here, a SID on Windows.
type User struct{ uid int }

func current() User { return User{uid: os.Getuid()} }

// UID is the user with uid n (tests stand in another user with it).
func UID(n int) User { return User{uid: n} }

func (u User) owns(path string, fi fs.FileInfo) (bool, error) {
	uid, err := uidOf(path, fi)
	return err == nil && uid == u.uid, err
}

func othersCanWrite(_ string, fi fs.FileInfo) (bool, error) {
	return fi.Mode().Perm()&0o022 != 0, nil
}

func me() string { return fmt.Sprintf("uid %d", os.Getuid()) }

func secret(path string, fi fs.FileInfo) (bool, error) {
	o, err := of(path, fi)
	return err == nil && o.Me && fi.Mode().Perm()&0o077 == 0, err
}

// known: every uid names a user (0 is root).
func (u User) known() bool { return true }

func (u User) String() string { return fmt.Sprintf("uid %d", u.uid) }

func restrict(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o600)
	if fi.IsDir() {
		mode = 0o700
	}
	return os.Chmod(path, mode)
}
