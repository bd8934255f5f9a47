package holder

import "github.com/fly-dev/fly/internal/proc"

// adopt makes the holder the child subreaper of what its run orphans.
func adopt() error { return proc.Subreaper() }
