//go:build unix

package runs

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fly-dev/fly/internal/proc"
)

// adoptOrphans makes this process the child subreaper of its
// descendants (Linux; macOS has none, and says so), then calls reap at
// once and whenever a child exits (SIGCHLD), until ctx ends.
func adoptOrphans(ctx context.Context, reap func()) error {
	if err := proc.Subreaper(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for {
		reap()
		select {
		case <-ctx.Done():
			return nil
		case <-sig:
		}
	}
}
