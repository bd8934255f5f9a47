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

// Me names the user this process runs as, for messages.
func Me() string { return me() }

// User is a user of this machine: a uid on Unix, a SID on Windows.
type User struct {
	uid int
	sid string
}

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
