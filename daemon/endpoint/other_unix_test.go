//go:build unix

package endpoint

import (
	"os"

	"github.com/fly-dev/fly/internal/owner"
)

// someoneElse is a user other than this process's.
func someoneElse() owner.User { return owner.UID(os.Getuid() + 1) }
