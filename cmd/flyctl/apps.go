package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

const appsUsage = `Usage:
  flyctl apps [--json]

Lists the Flutter apps that run outside fly (started by an IDE or a
terminal) that flyd found in its served workspaces, through the files
Dart Tooling Daemons write ($DART_DATA_HOME/dtd, else Dart's state
directory): each with a stable id, its name, the IDE that runs it, since
when flyd knows it, its VM-service URI and its workspace. --json prints
{"apps": [...]}.

Flags:
%s`

func runApps(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl apps", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the apps as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, appsUsage, fs.FlagUsages())
			return nil
		}
		return usagef("apps: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("apps takes no arguments, got %q", fs.Args())
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	l, err := listRuns(ctx, c)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(struct {
			Apps []json.RawMessage `json:"apps"`
		}{Apps: append([]json.RawMessage{}, l.rawApps...)})
		if err != nil {
			return err
		}
		return writeIndentedJSON(stdout, b)
	}
	if len(l.apps) == 0 {
		fmt.Fprintln(stderr, "flyctl: no app found outside fly in the served workspaces (an IDE's app shows once a session has its workspace open)")
		return nil
	}
	return writeAppsTable(stdout, l.apps, time.Now(), isTerminal(stdout))
}
