package dtd

import "github.com/fly-dev/fly/internal/owner"

// anotherUser is a user that is not this process's: a SID of a domain
// and user that no machine has.
func anotherUser() owner.User { return owner.SID("S-1-5-21-1-2-3-4242") }
