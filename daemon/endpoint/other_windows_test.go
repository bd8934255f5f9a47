package endpoint

import "github.com/fly-dev/fly/internal/owner"

// someoneElse is a user other than this process's: LocalSystem, which a
// test never runs as.
func someoneElse() owner.User { return owner.SID("S-1-5-18") }
