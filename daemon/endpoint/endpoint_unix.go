//go:build unix

package endpoint

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/fly-dev/fly/internal/owner"
	flypaths "github.com/fly-dev/fly/internal/paths"
)

func open(socket string) (net.Listener, func(), error) {
	if err := PrepareDir(socket); err != nil {
		return nil, nil, err
	}
	lock, err := Acquire(socket + ".lock")
	if err != nil {
		if errors.Is(err, ErrAlreadyRunning) {
			return nil, nil, fmt.Errorf("%w on socket %s", err, socket)
		}
		return nil, nil, err
	}
	ln, err := Listen(socket)
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	return ln, func() {
		os.Remove(socket)
		lock.Release()
	}, nil
}

// PrepareDir creates the socket's directory with mode 0700 and
// verifies that it is a real directory owned by this user that nobody
// else can enter.
func PrepareDir(socket string) error {
	if err := flypaths.CheckSocketPath(socket); err != nil {
		return err
	}
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory (a symlink?); remove it or set %s", dir, flypaths.EnvSocket)
	}
	o, err := owner.Of(dir, fi)
	if err != nil {
		return fmt.Errorf("check socket directory: %w", err)
	}
	if !o.Me {
		return fmt.Errorf("socket directory %s is owned by %s, not by you (%s); set %s to a directory you own", dir, o.Name, owner.Me(), flypaths.EnvSocket)
	}
	if alone, err := owner.Secret(dir, fi); err != nil || !alone {
		return fmt.Errorf("socket directory %s has mode %#o, others could reach the socket; run: chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}
