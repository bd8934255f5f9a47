package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// appsAbout is what flyctl apps --help says it does.
const appsAbout = `Lists the Flutter apps that run outside fly (started by an IDE or a
terminal) that flyd found in its served workspaces, through the files
Dart Tooling Daemons write ($DART_DATA_HOME/dtd, else Dart's state
directory): each with a stable id, its name, the IDE that runs it, since
when flyd knows it, its VM-service URI and its workspace. --json prints
{"apps": [...]}.`

type appsOptions struct{ json bool }

func (o *appsOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the apps as JSON")
}

func cmdApps(ctx context.Context, c *call, o *appsOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	l, err := lc.Runs(ctx)
	if err != nil {
		return err
	}
	if o.json {
		b, err := json.Marshal(struct {
			Apps []json.RawMessage `json:"apps"`
		}{Apps: append([]json.RawMessage{}, l.RawApps...)})
		if err != nil {
			return err
		}
		return writeIndentedJSON(c.stdout, b)
	}
	if len(l.Apps) == 0 {
		fmt.Fprintln(c.stderr, "flyctl: no app found outside fly in the served workspaces (an IDE's app shows once a session has its workspace open)")
		return nil
	}
	return writeAppsTable(c.stdout, l.Apps, time.Now(), isTerminal(c.stdout))
}
