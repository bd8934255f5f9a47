package dtd

import "github.com/fly-dev/fly/internal/owner"

// anotherUser: on Windows no file counts as the user's yet (see
// internal/owner), so any user is another.
func anotherUser() owner.User { return owner.Current() }
