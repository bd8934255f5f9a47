package holder

import "github.com/fly-dev/fly/internal/proc"

// On Windows the run's group is a job object the holder makes (internal/
// proc): nothing leaves it, nothing is adopted, and no signal reaches a
// windowless holder.

func ignoreSignals() {}

func adopt() error { return nil }

func forwardSignals(stop <-chan struct{}, signalTree func(proc.Signal) error) { <-stop }

func reapOrphans(leader int, stop <-chan struct{}) { <-stop }

// jobOf is the handle, in the holder, of the job object of the group
// led by pid: flyd duplicates it (see Client.Job).
func jobOf(pid int) uint64 { return uint64(proc.JobHandle(pid)) }
