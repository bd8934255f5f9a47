package main

import (
	"context"
	"fmt"

	"github.com/fly-dev/fly/internal/wire"
)

// versionAbout is what flyctl version --help says it does.
const versionAbout = `Prints flyctl's version and the number of the protocol it speaks to flyd.`

func cmdVersion(_ context.Context, c *call, _ *noFlags) error {
	if len(c.args) > 0 {
		return usagef("version takes no arguments")
	}
	_, err := fmt.Fprintf(c.stdout, "flyctl %s (protocol %d)\n", wire.Version, wire.Protocol)
	return err
}
