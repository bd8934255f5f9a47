package flytest

import (
	"context"
	"os/exec"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
)

// askToStop asks flyd to stop through its pipe, as flyctl does: Windows
// has no SIGTERM for a process without a console.
func askToStop(_ *exec.Cmd, socket string) error {
	lc := localclient.New(socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := lc.Shutdown(ctx)
	return err
}
