package holder

import (
	"os"

	"github.com/fly-dev/fly/internal/proc"
)

// On Windows the run's group is a job object the holder makes (internal/
// proc): nothing leaves it, nothing is adopted, and no signal reaches a
// windowless holder.

func takeSignals() <-chan os.Signal { return nil }

func adopt() error { return nil }

func forwardSignals(ch <-chan os.Signal, stop <-chan struct{}, signalTree func(proc.Signal) error) {
	<-stop
}

func reapOrphans(leader int, stop <-chan struct{}) { <-stop }

// jobOf is the handle, in the holder, of the job object of the group
// led by pid: flyd duplicates it (see Client.Job).
func jobOf(pid int) uint64 { return uint64(proc.JobHandle(pid)) }
