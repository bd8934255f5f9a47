package runs

import "context"

// On Windows a run's process group is a job object (internal/proc) that
// holds every descendant: a process in it cannot break away. Nothing
// needs a mark or a subreaper, and an orphan is not a zombie: Windows
// frees a process that ended once the last handle to it closes, with no
// parent to wait for it.

// adoptOrphans has nothing to adopt: the job holds the tree. It returns
// when ctx ends, as the Unix reaper does.
func adoptOrphans(ctx context.Context, reap func()) error {
	<-ctx.Done()
	return nil
}
