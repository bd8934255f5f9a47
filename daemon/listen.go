package daemon

import (
	"net/http"

	"github.com/fly-dev/fly/daemon/endpoint"
)

// ErrAlreadyRunning is returned by Server.Run when another flyd holds the
// lock of the state directory.
var ErrAlreadyRunning = endpoint.ErrAlreadyRunning

// onSocket reports whether r came over the Unix socket from a peer
// checked to be this user.
func onSocket(r *http.Request) bool {
	_, ok := endpoint.PeerFrom(r.Context())
	return ok
}
