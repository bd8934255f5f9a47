package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUntrusted is wrapped by CheckSocketTrust's refusals.
var ErrUntrusted = errors.New("flyd's socket is not safe to use")

// CheckSocketTrust checks, before a client connects to socket and sends
// it anything, that the socket and its directory belong to this user and
// that nobody else can write to the directory (as gopls's forwarder
// does): in a shared /tmp another user could otherwise create the
// directory first, listen there, read the editor's environment and feed
// answers to its agent. A socket or directory that does not exist yet is
// not an error: the dial will fail, or flyd will create them.
func CheckSocketTrust(socket string) error {
	uid := os.Getuid()
	dir := filepath.Dir(socket)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if err := owned(fi, uid, dir, "socket directory"); err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symlink?); remove it, or set %s to a path in a directory you own", ErrUntrusted, dir, EnvSocket)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: socket directory %s has mode %#o: others can replace the socket; run: chmod 700 %s", ErrUntrusted, dir, perm, dir)
	}
	fi, err = os.Lstat(socket)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if err := owned(fi, uid, socket, "socket"); err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s is not a socket; remove it", ErrUntrusted, socket)
	}
	return nil
}

func owned(fi fs.FileInfo, uid int, name, what string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == uid {
		return nil
	}
	return fmt.Errorf("%w: %s %s belongs to uid %d, not to you (uid %d): another user may be posing as flyd. "+
		"Remove it if you can, or set XDG_RUNTIME_DIR or %s to a directory only you can write", ErrUntrusted, what, name, st.Uid, uid, EnvSocket)
}
