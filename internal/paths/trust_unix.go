//go:build unix

package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fly-dev/fly/internal/owner"
)

// checkSocketTrust checks, before a client connects to socket and sends
// it anything, that the socket and its directory belong to this user and
// that nobody else can write to the directory (as gopls's forwarder
// does): in a shared /tmp another user could otherwise create the
// directory first, listen there, read the editor's environment and feed
// answers to its agent. A socket or directory that does not exist yet is
// not an error: the dial will fail, or flyd will create them.
func checkSocketTrust(socket string) error {
	dir := filepath.Dir(socket)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if err := owned(fi, dir, "socket directory"); err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symlink?); remove it, or set %s to a path in a directory you own", ErrUntrusted, dir, EnvSocket)
	}
	if shared, err := owner.OthersCanWrite(dir, fi); err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	} else if shared {
		return fmt.Errorf("%w: socket directory %s has mode %#o: others can replace the socket; run: chmod 700 %s", ErrUntrusted, dir, fi.Mode().Perm(), dir)
	}
	fi, err = os.Lstat(socket)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if err := owned(fi, socket, "socket"); err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s is not a socket; remove it", ErrUntrusted, socket)
	}
	return nil
}

func owned(fi fs.FileInfo, name, what string) error {
	o, err := owner.Of(name, fi)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if o.Me {
		return nil
	}
	return fmt.Errorf("%w: %s %s belongs to %s, not to you (%s): another user may be posing as flyd. "+
		"Remove it if you can, or set XDG_RUNTIME_DIR or %s to a directory only you can write", ErrUntrusted, what, name, o.Name, owner.Me(), EnvSocket)
}
