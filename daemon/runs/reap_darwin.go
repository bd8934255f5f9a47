package runs

import (
	"context"
	"errors"
)

// adoptOrphans: macOS has no subreapers.
func adoptOrphans(ctx context.Context, reap func()) error { return errNoSubreaper }

var errNoSubreaper = errors.New("macOS has no child subreaper")

// childProcesses: without a subreaper there are no adopted children.
func childProcesses(zombies bool) []int { return nil }

// markedProcesses: macOS does not let a process read another's
// environment cheaply; only the process group is stopped there.
func markedProcesses(id string) ([]int, error) { return nil, nil }
