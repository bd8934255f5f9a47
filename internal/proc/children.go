package proc

// A process that starts others and must not leave any behind (flyd, and
// the holder of one run) becomes the child subreaper of its descendants,
// waits for the zombies it adopts, and finds the processes that left
// their group by the mark in their environment. These are the operating
// system's calls for it; which processes belong to a run is the caller's.

// Subreaper makes this process the child subreaper of its descendants: a
// descendant orphaned by its parent's exit becomes this process's child
// rather than init's (Linux). Elsewhere it returns an error wrapping
// ErrUnsupported.
func Subreaper() error { return subreaper() }

// Children lists this process's children: the zombies only (exited, not
// yet waited for), or the living only. nil where the operating system
// cannot list them cheaply (macOS, Windows: there nothing is adopted).
func Children(zombies bool) []int { return children(zombies) }

// Reap waits for the child pid, which has exited, without blocking (Unix;
// Windows has no zombies). A pid that is not an exited child is not
// waited for.
func Reap(pid int) error { return reap(pid) }

// WithEnv lists the processes, other than this one, whose environment
// holds kv ("NAME=value") (Linux: /proc/PID/environ, readable for the
// user's own processes only). nil elsewhere: macOS does not let a process
// read another's environment cheaply, and on Windows no process leaves
// its job.
func WithEnv(kv string) []int { return withEnv(kv) }
