package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// grepAbout is what flyctl grep --help says it does.
const grepAbout = `Searches the files of the current directory's project (as flyctl mcp finds
it) from flyd's warm index, as the files_grep tool does: only the files flyd
serves (no build output, secrets, binaries or links out of the project).
PATTERN is an RE2 regular expression, or a fixed string with -F. Prints
path:line:text for each match (path-line-text for context lines), like
rg --no-heading. It starts indexing the project if no editor has.

Exits 0 when something matched, 1 when nothing did (as grep), 2 on a usage
error.`

// errNoMatch makes flyctl grep exit 1 without a message, as grep does.
var errNoMatch = errors.New("no match")

type grepOptions struct {
	glob      string
	ci        bool
	fixed     bool
	context   int
	max       int
	json      bool
	workspace string
}

func (o *grepOptions) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.glob, "glob", "g", "", "search only files whose path matches this glob (lib/**/*.dart)")
	fs.BoolVarP(&o.ci, "ignore-case", "i", false, "match case-insensitively")
	fs.BoolVarP(&o.fixed, "fixed-strings", "F", false, "PATTERN is a fixed string, not a regular expression")
	fs.IntVarP(&o.context, "context", "C", 0, "lines of context before and after each match (0-5)")
	fs.IntVarP(&o.max, "max-count", "m", 1000, "stop after this many matches")
	fs.BoolVar(&o.json, "json", false, "print flyd's result pages as JSON, one per line")
	fs.StringVar(&o.workspace, "workspace", "", "the project to search (default: the current directory's)")
}

func cmdGrep(ctx context.Context, c *call, o *grepOptions) error {
	if len(c.args) != 1 {
		return usagef("grep takes one PATTERN, got %d arguments", len(c.args))
	}
	if o.context < 0 || o.context > 5 {
		return usagef("grep: -C must be 0 to 5")
	}
	root, err := workspaceRoot(o.workspace, userHome(c.getenv))
	if err != nil {
		return err
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	q := localclient.GrepQuery{Workspace: root, Pattern: c.args[0], Context: o.context, Glob: o.glob, IgnoreCase: o.ci, Literal: o.fixed}
	total := 0
	for total < o.max {
		q.Limit = min(1000, o.max-total)
		res, err := lc.Grep(ctx, q)
		if err != nil {
			return fmt.Errorf("grep: %w", err)
		}
		if err := writeGrep(c.stdout, res, o.json); err != nil {
			return err
		}
		total += res.Matches
		if !res.Truncated || res.NextCursor == "" {
			break
		}
		q.Cursor = res.NextCursor
	}
	if total == 0 {
		return errNoMatch
	}
	return nil
}

// writeGrep writes a page of matches as rg --no-heading does, or as JSON.
func writeGrep(stdout io.Writer, res *wire.GrepResult, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(b, '\n'))
		return err
	}
	for _, f := range res.Files {
		for _, m := range f.Matches {
			for i, l := range m.Before {
				fmt.Fprintf(stdout, "%s-%d-%s\n", f.Path, m.Line-len(m.Before)+i, l)
			}
			fmt.Fprintf(stdout, "%s:%d:%s\n", f.Path, m.Line, m.Text)
			for i, l := range m.After {
				fmt.Fprintf(stdout, "%s-%d-%s\n", f.Path, m.Line+1+i, l)
			}
		}
	}
	return nil
}
