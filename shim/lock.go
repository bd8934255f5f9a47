package shim

import (
	"context"
	"errors"
	"fmt"

	"github.com/fly-dev/fly/internal/lockfile"
)

// startLockName is the file in the state directory that a shim holds an
// exclusive lock on while it starts flyd and waits for it to answer, so
// that shims started together start one flyd: the others wait for the
// lock, then find flyd answering.
const startLockName = "start.lock"

// lockFile takes the exclusive lock of path (internal/lockfile), creating
// the file (0600) if needed. While another process holds the lock it
// polls until ctx is done. The lock is released by unlock, or when the
// process exits; the descriptor is close-on-exec, so a flyd started
// under the lock does not inherit it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	l, err := lockfile.Lock(ctx, path)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("lock %s: another flyctl held it too long: %w", path, ctx.Err())
		}
		return nil, err
	}
	return func() { l.Unlock() }, nil
}
