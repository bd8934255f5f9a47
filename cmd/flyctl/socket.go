package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/spf13/pflag"
)

// runSocket prints the socket path flyd listens on for this environment,
// for tools that speak to flyd's HTTP API directly.
func runSocket(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl socket", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flyctl socket\n\nPrints the path of flyd's Unix socket (FLY_SOCKET overrides it).\n\nExamples:\n  flyctl socket\n  curl --unix-socket \"$(flyctl socket)\" http://flyd/v1/status\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("socket takes no arguments")
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, p.Socket)
	return err
}
