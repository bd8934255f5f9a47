package endpoint

import (
	"errors"
	"fmt"
	"net"

	"github.com/fly-dev/fly/internal/ipc"
)

// open listens on the named pipe: FILE_FLAG_FIRST_PIPE_INSTANCE is the
// socket's lock there, and the pipe goes with its last handle.
func open(pipe string) (net.Listener, func(), error) {
	ln, err := Listen(pipe)
	if errors.Is(err, ipc.ErrInUse) {
		return nil, nil, fmt.Errorf("%w on pipe %s (or another program holds its name)", ErrAlreadyRunning, pipe)
	}
	if err != nil {
		return nil, nil, err
	}
	return ln, func() {}, nil
}
