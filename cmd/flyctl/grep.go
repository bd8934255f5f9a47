package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const grepUsage = `Usage:
  flyctl grep [flags] PATTERN

Searches the files of the current directory's project (as flyctl mcp finds
it) from flyd's warm index, as the files_grep tool does: only the files flyd
serves (no build output, secrets, binaries or links out of the project).
PATTERN is an RE2 regular expression, or a fixed string with -F. Prints
path:line:text for each match (path-line-text for context lines), like
rg --no-heading. It starts indexing the project if no editor has.

Exits 0 when something matched, 1 when nothing did (as grep), 2 on a usage
error.

Flags:
%s
Examples:
  flyctl grep setState
  flyctl grep -g 'lib/**/*.dart' -i 'todo|fixme'
  flyctl grep -F -C 2 'Navigator.of(context)'
  flyctl grep --json StreamBuilder | jq '.files[].path'
`

// errNoMatch makes flyctl grep exit 1 without a message, as grep does.
var errNoMatch = errors.New("no match")

func runGrep(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl grep", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	glob := fs.StringP("glob", "g", "", "search only files whose path matches this glob (lib/**/*.dart)")
	ci := fs.BoolP("ignore-case", "i", false, "match case-insensitively")
	fixed := fs.BoolP("fixed-strings", "F", false, "PATTERN is a fixed string, not a regular expression")
	ctxLines := fs.IntP("context", "C", 0, "lines of context before and after each match (0-5)")
	max := fs.IntP("max-count", "m", 1000, "stop after this many matches")
	asJSON := fs.Bool("json", false, "print flyd's result pages as JSON, one per line")
	workspace := fs.String("workspace", "", "the project to search (default: the current directory's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, grepUsage, fs.FlagUsages())
			return nil
		}
		return usagef("grep: %v", err)
	}
	if fs.NArg() != 1 {
		return usagef("grep takes one PATTERN, got %d arguments", fs.NArg())
	}
	if *ctxLines < 0 || *ctxLines > 5 {
		return usagef("grep: -C must be 0 to 5")
	}
	root, err := workspaceRoot(*workspace, getenv("HOME"))
	if err != nil {
		return err
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	q := url.Values{"workspace": {root}, "pattern": {fs.Arg(0)}, "context": {strconv.Itoa(*ctxLines)}}
	if *glob != "" {
		q.Set("glob", *glob)
	}
	if *ci {
		q.Set("i", "1")
	}
	if *fixed {
		q.Set("literal", "1")
	}
	total := 0
	for total < *max {
		q.Set("limit", strconv.Itoa(min(1000, *max-total)))
		var res wire.GrepResult
		if err := c.callJSON(ctx, http.MethodGet, wire.RouteGrep, q, &res); err != nil {
			return fmt.Errorf("grep: %w", err)
		}
		if *asJSON {
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if _, err := stdout.Write(append(b, '\n')); err != nil {
				return err
			}
		} else {
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
		}
		total += res.Matches
		if !res.Truncated || res.NextCursor == "" {
			break
		}
		q.Set("cursor", res.NextCursor)
	}
	if total == 0 {
		return errNoMatch
	}
	return nil
}
