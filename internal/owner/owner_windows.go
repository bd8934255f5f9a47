package owner

import (
	"fmt"
	"io/fs"
)

// of is not written for Windows yet (the owner SID of the file's security
// descriptor against the process token's user): it refuses rather than
// trusting every file.
func of(path string, _ fs.FileInfo) (Owner, error) {
	return Owner{}, fmt.Errorf("the owner of %s: checking a file's owner is %w (Windows)", path, ErrUnsupported)
}

// othersCanWrite is not written for Windows yet (the file's DACL): it
// refuses rather than trusting every file.
func othersCanWrite(path string, _ fs.FileInfo) (bool, error) {
	return false, fmt.Errorf("who may write %s: reading a file's access list is %w (Windows)", path, ErrUnsupported)
}

func me() string { return "this user" }

func current() User { return User{} }

// owns is not written for Windows yet (see of).
func (u User) owns(path string, fi fs.FileInfo) (bool, error) {
	_, err := of(path, fi)
	return false, err
}

// runs is not written for Windows yet (the process token's user): no
// process counts as the user's.
func (u User) runs(int) bool { return false }

// secret is not written for Windows yet (the file's owner and DACL): no
// file counts as secret, so a token is made anew rather than trusted.
func secret(path string, fi fs.FileInfo) (bool, error) {
	_, err := of(path, fi)
	return false, err
}

func (u User) String() string {
	if u.sid == "" {
		return "an unknown user"
	}
	return u.sid
}
