// Package owner answers, for the operating system at hand, who owns a
// file and whether users other than its owner may change it: flyd trusts
// a socket, a token, a config file or a DTD file only if it is the user's
// own. Identity here is "the same user as this process" (a uid on Unix,
// a SID on Windows), never a number compared by hand in the callers. It
// owns the question, not what a caller refuses.
package owner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Owner is who owns a file.
type Owner struct {
	Me   bool   // the user this process runs as
	Name string // for messages: "uid 1000", or a SID
}

// Of returns the owner of fi, which Stat or Lstat returned for path.
func Of(path string, fi fs.FileInfo) (Owner, error) { return of(path, fi) }

// OthersCanWrite reports whether users other than fi's owner may write
// to it (for a directory: create, remove or replace its entries).
func OthersCanWrite(path string, fi fs.FileInfo) (bool, error) { return othersCanWrite(path, fi) }

// Secret reports whether fi, which Lstat returned for path, is the
// user's and no other user may read or write it: a token's file.
func Secret(path string, fi fs.FileInfo) (bool, error) { return secret(path, fi) }

// Restrict makes path, a file or directory of this user's, the user's
// alone: mode 0600 (a directory 0700) on Unix; on Windows an access list
// of its own (nothing inherited) that grants the user full control, which
// a directory's new entries inherit.
func Restrict(path string) error { return restrict(path) }

// MkdirPrivate creates dir and its missing parents as os.MkdirAll does
// (mode 0700), and makes dir the user's alone (Restrict) if it made it. A
// directory that exists is left as it is: where its privacy matters, the
// caller checks it (Secret).
func MkdirPrivate(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return Restrict(dir)
}

// Me names the user this process runs as, for messages.
func Me() string { return me() }

// Known reports whether u names a user: false for the zero User, and on
// Windows for Current when the process's token could not be read.
func (u User) Known() bool { return u.known() }

// Current is the user this process runs as.
func Current() User { return current() }

// Owns reports whether u owns fi, which Stat or Lstat returned for path.
func (u User) Owns(path string, fi fs.FileInfo) (bool, error) { return u.owns(path, fi) }

// String names u for messages: "uid 1000", or a SID.
var _ fmt.Stringer = User{}

// Runs reports whether process pid is alive and runs as u (its real user).
func (u User) Runs(pid int) bool { return u.runs(pid) }

// ErrUnsupported is wrapped by what this package cannot answer on this
// operating system yet.
var ErrUnsupported = errors.New("not supported on this operating system yet")
