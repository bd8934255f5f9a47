package runs

import (
	"context"
	"errors"
)

// Windows has no subreaper, no SIGCHLD and no environment of another
// process to read: what reaches a run's whole tree there is a job object,
// which is the next issue's work (with internal/proc's groups). Until
// then these refuse with an error rather than pretend.

var errNoAdoption = errors.New("adopting and reaping a run's orphaned descendants is not supported on Windows yet")

func adoptOrphans(ctx context.Context, reap func()) error { return errNoAdoption }

// childProcesses: nothing was adopted (adoptOrphans refused).
func childProcesses(zombies bool) []int { return nil }

func reapZombie(pid int) error { return errNoAdoption }

func markedProcesses(id string) ([]int, error) {
	if id == "" {
		return nil, nil
	}
	return nil, errors.New("finding the processes that carry a run's mark is not supported on Windows yet")
}
