package main

import (
	"context"
	"fmt"

	"github.com/fly-dev/fly/internal/paths"
)

// socketAbout is what flyctl socket --help says it does: it is for tools
// that speak to flyd's HTTP API directly.
const socketAbout = `Prints the path of flyd's Unix socket, or on Windows the name of its named pipe
(FLY_SOCKET overrides it).`

func cmdSocket(_ context.Context, c *call, _ *noFlags) error {
	if len(c.args) > 0 {
		return usagef("socket takes no arguments")
	}
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, p.Socket)
	return err
}
