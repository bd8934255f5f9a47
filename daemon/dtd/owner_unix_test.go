//go:build unix

package dtd

import (
	"os"

	"github.com/fly-dev/fly/internal/owner"
)

// anotherUser is a user who is not this process's.
func anotherUser() owner.User { return owner.UID(os.Getuid() + 1) }
