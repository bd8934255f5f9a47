package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// startLockName is the file in the state directory that a shim holds an
// exclusive flock on while it starts flyd and waits for it to answer, so
// that shims started together start one flyd: the others wait for the
// lock, then find flyd answering.
const startLockName = "start.lock"

// lockFile takes an exclusive flock on path, creating the file (0600) if
// needed. While another process holds the lock it polls until ctx is
// done. The lock is released by unlock, or when the process exits; the
// descriptor is close-on-exec, so a flyd started under the lock does not
// inherit it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	fd := int(f.Fd())
	delay := 5 * time.Millisecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(fd, syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock %s: another flyctl held it too long: %w", path, ctx.Err())
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}
