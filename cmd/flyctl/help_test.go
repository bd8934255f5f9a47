package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/paths"
)

// helpEnv is a fixed environment, so that the paths a help page names
// are the same on every machine.
func helpEnv(k string) string {
	return map[string]string{
		"HOME":           "/home/dev",
		"FLY_SOCKET":     "/run/user/1000/fly/flyd.sock",
		"FLY_STATE_DIR":  "/home/dev/.local/state/fly",
		"FLY_CONFIG_DIR": "/home/dev/.config/fly",
	}[k]
}

// helpPages are the command lines that print the help page of each
// command of the table: "--help" after every command and group.
func helpPages() [][]string {
	var pages [][]string
	var walk func(cmd *command, words []string)
	walk = func(cmd *command, words []string) {
		pages = append(pages, append(slices.Clone(words), "--help"))
		for _, v := range cmd.verbs {
			walk(v, append(slices.Clone(words), v.name))
		}
	}
	walk(commands(), nil)
	return pages
}

// TestHelpPages keeps every help page in testdata/help: a change to one
// shows in review as a change to its golden file (go test -update
// rewrites them).
func TestHelpPages(t *testing.T) {
	for _, args := range helpPages() {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, helpEnv, strings.NewReader(""), &stdout, &stderr)
		if code := exitCode(err, &stderr); code != 0 {
			t.Errorf("flyctl %q exits %d, want 0\n%s", args, code, &stderr)
			continue
		}
		name := strings.Join(args[:len(args)-1], "_")
		if name == "" {
			name = "flyctl"
		}
		if stderr.Len() > 0 {
			t.Errorf("flyctl %q wrote %q to stderr, want its page on stdout only", args, &stderr)
		}
		if !strings.Contains(stdout.String(), "Usage:\n  flyctl ") {
			t.Errorf("flyctl %q has no synopsis:\n%s", args, &stdout)
		}
		checkGolden(t, "help/"+name+".golden", helpPaths(t, stdout.String()))
	}
}

// helpPaths writes the files a page names (under helpEnv's paths, made
// absolute on this OS: Z:\home\dev\... on Windows) as Unix spells them,
// so that the goldens are the same on every OS. On Unix it changes
// nothing.
func helpPaths(t *testing.T, page string) string {
	t.Helper()
	p, err := paths.Resolve(helpEnv)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for _, f := range []string{p.Token(), p.HTTPAddr(), p.Upstreams()} {
		pairs = append(pairs, f, filepath.ToSlash(strings.TrimPrefix(f, filepath.VolumeName(f))))
	}
	return strings.NewReplacer(pairs...).Replace(page)
}

// TestCommandLines: how the table reads a command line: a group without
// a verb, or with one it does not know, is a usage error; aliases name
// their command; --help after any command prints its page.
func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, 2, "", "Usage:\n  flyctl <command> [flags]"},
		{nil, 2, "", "flyctl: no command given\n"},
		{[]string{"service"}, 2, "", "flyctl: service: no command given\n"},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"token"}, 2, "", "token needs one verb: print or rotate"},
		{[]string{"token", "show"}, 2, "", `unknown token verb "show"`},
		{[]string{"token", "print", "extra"}, 2, "", "token needs one verb: print or rotate"},
		{[]string{"upstream", "rm"}, 2, "", "upstream remove takes one NAME"},
		{[]string{"upstream", "add", "--bogus"}, 2, "", "upstream add: unknown flag: --bogus"},
		{[]string{"socket", "--bogus"}, 2, "", "socket: unknown flag: --bogus"},
		{[]string{"version", "extra"}, 2, "", "version takes no arguments"},
		{[]string{"upstreams", "--help"}, 0, "Usage:\n  flyctl upstream add NAME", ""},
		{[]string{"token", "print", "--help"}, 0, "Usage:\n  flyctl token print\n  flyctl token rotate\n", ""},
		{[]string{"help"}, 0, "Commands:\n  mcp ", ""},
		{[]string{"service", "-h"}, 0, "Commands:\n  install ", ""},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, helpEnv, strings.NewReader(""), &stdout, &stderr)
		code := exitCode(err, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) ||
			tc.stdout == "" && stdout.Len() > 0 || tc.stderr == "" && stderr.Len() > 0 {
			t.Errorf("flyctl %q: exit %d, stdout %q, stderr %q; want %d, %q and %q", tc.args, code, &stdout, &stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
