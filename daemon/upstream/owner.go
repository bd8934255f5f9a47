package upstream

import (
	"fmt"
	"os"

	fileowner "github.com/fly-dev/fly/internal/owner"
)

// checkOwner refuses a config file that another user owns or can write:
// whoever can write it decides what flyd runs. Who owns it is
// internal/owner's question (a uid on Unix, a SID on Windows); a file
// whose owner cannot be told is refused.
func checkOwner(path string, fi os.FileInfo) error {
	o, err := fileowner.Of(path, fi)
	if err != nil {
		return fmt.Errorf("%w: flyd will not run what %s says", err, path)
	}
	if !o.Me {
		return fmt.Errorf("%s belongs to %s, not to you: flyd will not run what it says", path, o.Name)
	}
	others, err := fileowner.OthersCanWrite(path, fi)
	if err != nil {
		return fmt.Errorf("%w: flyd will not run what %s says", err, path)
	}
	if others {
		return fmt.Errorf("%s is writable by others (mode %v): flyd will not run what it says; chmod go-w it", path, fi.Mode().Perm())
	}
	return nil
}
