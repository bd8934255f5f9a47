package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/spf13/pflag"
)

// A command is a row of flyctl's table of commands (commands.go): a
// command that runs, or a group of verbs (flyctl service install). Its
// help page is generated from the row; see page.
type command struct {
	name     string
	aliases  []string // other words that name it ("upstreams", "rm")
	summary  string   // one line, in its group's list of commands
	usage    string   // the synopsis lines of its page, one per line; "" for the page of its group (or, for a group, of its first verb)
	about    string   // what its page says after the synopsis (the paragraphs of a root page before it)
	examples string   // the lines of its page's examples, without indentation
	run      handler  // what runs it; nil for a group

	verbs    []*command // a group's verbs
	needVerb string     // a group's usage error without a verb; "" prints its page on stderr and says no command was given
	badVerb  string     // a group's usage error for a verb it does not know, formatting the verb (%q)

	parent *command
}

// A handler defines a command's flags on fs and returns the function
// that runs the command once they are parsed.
type handler func(fs *pflag.FlagSet) func(context.Context, *call) error

// options are a command's flags: a struct whose flags method defines
// each flag on a FlagSet, bound to a field.
type options[O any] interface {
	*O
	flags(fs *pflag.FlagSet)
}

// handle makes the handler of a command function, which gets its
// parsed options: handle(cmdStop) for cmdStop(ctx, c, *stopOptions).
func handle[O any, P options[O]](run func(context.Context, *call, P) error) handler {
	return func(fs *pflag.FlagSet) func(context.Context, *call) error {
		o := P(new(O))
		o.flags(fs)
		return func(ctx context.Context, c *call) error { return run(ctx, c, o) }
	}
}

// noFlags are the options of a command without flags.
type noFlags struct{}

func (*noFlags) flags(*pflag.FlagSet) {}

// call is one command line being run: flyctl's environment, the command
// it names, its parsed flags and the arguments left after them.
type call struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	cmd   *command
	flags *pflag.FlagSet
	args  []string

	// service is the machine flyctl service acts on: the real one
	// unless a test put a fake here (see serviceCmd.run).
	service *serviceCmd
	// host is what setup, doctor and uninstall run on (see machine):
	// the real machine unless a test put a fake here.
	host *host
}

// client is a client of the flyd this environment names. It tells the
// user, once, when that flyd is older than this flyctl.
func (c *call) client() (*localclient.Client, error) {
	lc, err := newClient(c.getenv)
	if err != nil {
		return nil, err
	}
	lc.OnVersion(c.olderFlydNotice())
	return lc, nil
}

// newClient is a client of the flyd on the socket getenv's environment
// names.
func newClient(getenv func(string) string) (*localclient.Client, error) {
	p, err := paths.Resolve(getenv)
	if err != nil {
		return nil, err
	}
	return localclient.New(p.Socket), nil
}

// noArgs is the usage error of a command that takes no arguments but
// was given some.
func (c *call) noArgs() error {
	if len(c.args) == 0 {
		return nil
	}
	return usagef("%s takes no arguments, got %q", c.cmd.path(), c.args)
}

// link sets the parent of every verb under cmd, and returns cmd.
func (cmd *command) link() *command {
	for _, v := range cmd.verbs {
		v.parent = cmd
		v.link()
	}
	return cmd
}

// path is the command's words after "flyctl": "logs tail"; "" for the
// root.
func (cmd *command) path() string {
	if cmd.parent == nil {
		return ""
	}
	if p := cmd.parent.path(); p != "" {
		return p + " " + cmd.name
	}
	return cmd.name
}

// verb finds the verb of a group named word.
func (cmd *command) verb(word string) *command {
	for _, v := range cmd.verbs {
		if v.name == word || slices.Contains(v.aliases, word) {
			return v
		}
	}
	return nil
}

// dispatch runs the command that args name under cmd: the group's verb
// each word names, then the command with the rest of args as its flags
// and arguments. --help prints the page of the command named so far.
func dispatch(ctx context.Context, c *call, cmd *command, args []string) error {
	for cmd.verbs != nil {
		if len(args) == 0 {
			if cmd.needVerb != "" {
				return usagef("%s", cmd.needVerb)
			}
			pg, err := cmd.page(c.getenv)
			if err != nil {
				return err
			}
			fmt.Fprint(c.stderr, pg)
			if p := cmd.path(); p != "" {
				return usagef("%s: no command given", p)
			}
			return usagef("no command given")
		}
		if isHelp(args[0]) {
			return cmd.printPage(c)
		}
		v := cmd.verb(args[0])
		if v == nil {
			return usagef(cmd.badVerb, args[0])
		}
		cmd, args = v, args[1:]
	}
	fs := newFlagSet(cmd)
	run := cmd.run(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return cmd.printPage(c)
		}
		return usagef("%s: %v", cmd.path(), err)
	}
	c.cmd, c.flags, c.args = cmd, fs, fs.Args()
	return run(ctx, c)
}

func isHelp(word string) bool { return word == "-h" || word == "--help" || word == "help" }

// newFlagSet is the empty FlagSet of a command: it prints nothing, and
// its errors are flyctl's usage errors.
func newFlagSet(cmd *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flyctl "+cmd.path(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// printPage prints the command's help page on stdout.
func (cmd *command) printPage(c *call) error {
	pg, err := cmd.page(c.getenv)
	if err != nil {
		return err
	}
	_, err = io.WriteString(c.stdout, pg)
	return err
}

// page is the command's help page, generated from its row: the synopsis,
// what it does, a group's list of verbs, the flags and the examples. A
// command without a synopsis of its own is documented by its group's
// page, a group without one by its first verb's. A group documents the
// flags of verbs without pages of their own.
func (cmd *command) page(getenv func(string) string) (string, error) {
	switch {
	case cmd.usage == "" && cmd.verbs != nil:
		return cmd.verbs[0].page(getenv)
	case cmd.usage == "" && cmd.parent != nil:
		return cmd.parent.page(getenv)
	}
	var sections []string
	synopsis := "Usage:\n" + indent(cmd.usage)
	if cmd.parent == nil {
		sections = append(sections, cmd.about, synopsis) // a program's page opens with what it is
	} else {
		sections = append(sections, synopsis, cmd.about)
	}
	if cmd.verbs != nil {
		sections = append(sections, "Commands:\n"+cmd.verbList())
		if cmd.verbs[0].usage != "" {
			sections = append(sections, fmt.Sprintf("Run '%s <command> --help' for its flags.", strings.TrimSpace("flyctl "+cmd.path())))
		}
	}
	if fs := cmd.documentedFlags(); fs.HasAvailableFlags() {
		sections = append(sections, "Flags:\n"+strings.TrimSuffix(fs.FlagUsages(), "\n"))
	}
	if cmd.examples != "" {
		sections = append(sections, "Examples:\n"+indent(cmd.examples))
	}
	pg := strings.Join(sections, "\n\n") + "\n"
	return expandPaths(pg, getenv)
}

// documentedFlags are the flags on a command's page: its own, or for a
// group, those of its verbs without pages of their own.
func (cmd *command) documentedFlags() *pflag.FlagSet {
	fs := newFlagSet(cmd)
	if cmd.run != nil {
		cmd.run(fs)
		return fs
	}
	for i, v := range cmd.verbs {
		if v.usage != "" || v.run == nil {
			continue
		}
		vfs := newFlagSet(v)
		v.run(vfs)
		if i == 0 {
			fs.SortFlags = vfs.SortFlags
		}
		vfs.VisitAll(func(f *pflag.Flag) {
			if fs.Lookup(f.Name) == nil {
				fs.AddFlag(f)
			}
		})
	}
	return fs
}

// verbList is a group's verbs, one per line with its summary.
func (cmd *command) verbList() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, v := range cmd.verbs {
		fmt.Fprintf(tw, "  %s\t%s\n", v.name, v.summary)
	}
	tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// indent indents each non-empty line of s by two spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

// The files a page may name, by placeholder.
const (
	placeTokenFile     = "{token file}"
	placeHTTPAddrFile  = "{http.addr file}"
	placeUpstreamsFile = "{upstreams file}"
)

// expandPaths fills the placeholders of the files a page names with
// their paths in this environment.
func expandPaths(pg string, getenv func(string) string) (string, error) {
	if !strings.Contains(pg, placeTokenFile) && !strings.Contains(pg, placeHTTPAddrFile) && !strings.Contains(pg, placeUpstreamsFile) {
		return pg, nil
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return "", err
	}
	return strings.NewReplacer(placeTokenFile, p.Token(), placeHTTPAddrFile, p.HTTPAddr(), placeUpstreamsFile, p.Upstreams()).Replace(pg), nil
}
