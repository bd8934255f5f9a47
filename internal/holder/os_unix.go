//go:build unix

package holder

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/fly-dev/fly/internal/proc"
)

// takeSignals: a write to a flyd that died is an error, not the holder's
// death (SIGPIPE); a spool past a file-size limit is a write error to
// wait out, not a core dump (SIGXFSZ); the terminal a flyd was started
// from going away is nothing to the holder (SIGHUP). SIGTERM and SIGINT
// are caught from the start, for forwardSignals: one that comes before
// the run has started reaches it once it has.
func takeSignals() <-chan os.Signal {
	signal.Ignore(syscall.SIGPIPE, syscall.SIGXFSZ, syscall.SIGHUP)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	return ch
}

// forwardSignals passes a SIGTERM or SIGINT to the holder on to the run
// (the first as SIGTERM, any later one as SIGKILL), which then ends and
// is recorded so, until stop is closed.
func forwardSignals(ch <-chan os.Signal, stop <-chan struct{}, signalTree func(proc.Signal) error) {
	sig := proc.Terminate
	for {
		select {
		case <-ch:
			_ = signalTree(sig)
			sig = proc.Kill
		case <-stop:
			return
		}
	}
}

// reapOrphans waits for the zombies the holder adopted (never the
// leader, which its exec.Cmd waits for) whenever a child exits, until
// stop is closed.
func reapOrphans(leader int, stop <-chan struct{}) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	for {
		for _, pid := range proc.Children(true) {
			if pid != leader {
				_ = proc.Reap(pid)
			}
		}
		select {
		case <-ch:
		case <-stop:
			return
		}
	}
}

// jobOf: Unix has no job object.
func jobOf(pid int) uint64 { return 0 }
