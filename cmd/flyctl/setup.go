package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// setupAbout is what flyctl setup --help says it does.
const setupAbout = `Sets fly up after installing it, in one go: it finds the MCP clients on this
machine and registers fly in each, for all your projects (user scope), then
installs flyd as a service of your user. It says what it did, and how to
undo it: flyctl uninstall. Running it again changes only what is out of
date, and says so.

The clients (CLIENT):

  claude-code  Claude Code: claude mcp add --scope user fly -- FLYCTL mcp
               (else ~/.claude.json)
  claude       Claude Desktop: claude_desktop_config.json; see below
  cursor       Cursor: ~/.cursor/mcp.json (--workspace ${workspaceFolder})
  vscode       VS Code: code --add-mcp '{"name":"fly",...}' (else the user
               mcp.json; --workspace ${workspaceFolder})
  codex        Codex: codex mcp add fly -- FLYCTL mcp (else a table in
               ~/.codex/config.toml, the rest of the file kept)
  gemini       Gemini CLI: gemini mcp add --scope user fly FLYCTL mcp (else
               ~/.gemini/settings.json)
  windsurf     Windsurf: ~/.codeium/windsurf/mcp_config.json

A client is found by its command on PATH or its settings directory. Each
gets the server "fly" running this flyctl by its absolute path (symlinks
resolved), so that no other flyctl on PATH (fly.io's is one) is run
instead. A client's own command is used where it has one, else its file is
edited in place: only "fly" changes, atomically, the rest of the file
(other servers, comments, indentation) as it was. An existing "fly" that
is not flyctl mcp is left alone. The tool filter (--tools, --disable) of an
existing fly entry is kept.

Claude Desktop has no project, and flyctl mcp binds its session to one as
it starts, before the client could name its roots: its entry binds the
project --workspace names (and pins this shell's PATH and Flutter
variables). Without --workspace, setup leaves it alone.

The service is flyctl service install's, skipped when installed and
current (see flyctl service --help).

Where dart 3.9 or newer is on PATH, setup offers to share dart mcp-server
through fly, so that every agent on a project uses one analysis server
(its tools are dart_*): it adds "dart" to flyd's upstreams, in
` + placeUpstreamsFile + `,
and removes the clients' own dart mcp-server entries (where fly is set),
since fly serves those tools now. It asks on a terminal; --yes answers
yes; without a terminal it only says how.

--dry-run shows all of this without changing anything.`

type setupOptions struct {
	clients   []string
	workspace string
	yes       bool
	dryRun    bool
	noService bool
	allowRoot bool
}

func (o *setupOptions) flags(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringArrayVar(&o.clients, "client", nil, "only this `CLIENT` (repeatable): "+userClientNames())
	fs.StringVar(&o.workspace, "workspace", "", "the project `DIR` Claude Desktop's fly serves (default: the Flutter project of the current directory, if any)")
	fs.BoolVarP(&o.yes, "yes", "y", false, "answer yes to what setup offers (sharing dart mcp-server)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "show what setup would do; change nothing")
	fs.BoolVar(&o.noService, "no-service", false, "leave the login service alone")
	fs.BoolVar(&o.allowRoot, "allow-root", false, "install the service even when running as root")
}

// report prints setup's and uninstall's steps, one line each, and counts
// what changed and what failed.
type report struct {
	w       io.Writer
	dryRun  bool
	changed int
	failed  int
	next    []string // what to do for the changes to take effect
	undo    []string
}

func (r *report) section(title string) { fmt.Fprintf(r.w, "\n%s\n", title) }

// line prints one step: its subject, what happened, and the details.
func (r *report) line(subject, status, detail string) {
	text := fmt.Sprintf("  %-12s %-13s %s", subject, status, detail)
	fmt.Fprintln(r.w, strings.TrimRight(text, " "))
}

// more prints a detail line under a step.
func (r *report) more(detail string) {
	for _, l := range strings.Split(strings.TrimRight(detail, "\n"), "\n") {
		fmt.Fprintf(r.w, "  %-12s %-13s %s\n", "", "", l)
	}
}

// did prints a change: done, or in a dry run what would be done.
func (r *report) did(subject, done, would, detail string) {
	r.changed++
	if r.dryRun {
		done = would
	}
	r.line(subject, done, detail)
}

func (r *report) fail(subject string, err error) {
	r.failed++
	r.line(subject, "failed", err.Error())
}

func cmdSetup(ctx context.Context, c *call, o *setupOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	clients, err := pickClients("setup", o.clients)
	if err != nil {
		return err
	}
	dir := ""
	if o.workspace != "" {
		if dir, err = configDir(o.workspace); err != nil {
			return err
		}
		if err := paths.CheckRoot(dir, userHome(c.getenv)); err != nil {
			return usagef("setup: --workspace: %v", err)
		}
	}
	here := ""
	if dir == "" {
		here = currentProject(userHome(c.getenv))
	}
	h := c.machine()
	self, err := selfExecutable(h)
	if err != nil {
		return err
	}
	r := &report{w: c.stdout, dryRun: o.dryRun}
	fmt.Fprintf(r.w, "flyctl setup: fly is %s (%s)\n", self, wire.Version)
	if o.dryRun {
		fmt.Fprintln(r.w, "dry run: nothing is changed")
	}
	if first := findProgram("flyctl", c.getenv); first != "" && !sameProgram(first, self, c.getenv) {
		fmt.Fprintf(r.w, "note: PATH finds %s before this flyctl; the clients get this one's path (flyctl doctor says which it is)\n", first)
	}

	r.section(`MCP clients (user scope, server "fly"):`)
	var withFly []*clientState
	for _, uc := range clients {
		st := uc.inspect(c.getenv)
		if setupClient(ctx, c, h, r, st, self, dir, here, o.dryRun) {
			withFly = append(withFly, st)
		}
	}

	setupDart(ctx, c, h, r, withFly, o)

	if !o.noService {
		r.section("flyd service:")
		setupService(ctx, c, r, o)
	}

	switch {
	case r.failed > 0:
		fmt.Fprintf(r.w, "\n%d step(s) failed; see above.\n", r.failed)
	case o.dryRun && r.changed > 0:
		fmt.Fprintf(r.w, "\nDry run: nothing was changed; flyctl setup without --dry-run makes these %d change(s).\n", r.changed)
	case r.changed == 0:
		fmt.Fprintln(r.w, "\nNothing to change: fly is set up.")
	default:
		fmt.Fprintf(r.w, "\nDone: %d change(s).\n", r.changed)
	}
	if len(r.next) > 0 && !o.dryRun {
		fmt.Fprintln(r.w, "Then:")
		for _, n := range r.next {
			fmt.Fprintf(r.w, "  %s\n", n)
		}
	}
	fmt.Fprintln(r.w, "Undo: flyctl uninstall (removes fly from these clients and the service)")
	for _, u := range r.undo {
		fmt.Fprintf(r.w, "  %s\n", u)
	}
	if r.failed > 0 {
		return fmt.Errorf("setup: %d step(s) failed; fix them, then run flyctl setup again (it redoes only what is missing)", r.failed)
	}
	return nil
}

// setupClient registers fly in one client, and reports whether the client
// has it afterwards (or would, in a dry run).
func setupClient(ctx context.Context, c *call, h *host, r *report, st *clientState, self, dir, here string, dryRun bool) bool {
	uc := st.uc
	switch {
	case !st.present:
		r.line(uc.name, "not found", "")
		return false
	case st.err != nil:
		r.fail(uc.name, st.err)
		return false
	}
	have, hasFly := st.servers[serverName]
	var opts *mcpOptions
	if hasFly {
		o, ours := flyctlEntry(have)
		if !ours {
			r.line(uc.name, "skipped", fmt.Sprintf("%s has a %q server that is not flyctl mcp (%s); rename it, then run setup again", st.file, serverName, strings.Join(append([]string{have.Command}, have.Args...), " ")))
			return false
		}
		opts = &o
	}
	wsDir, guessed := dir, false
	if uc.needsWorkspace && wsDir == "" {
		switch {
		case opts != nil && opts.workspace != "":
			wsDir = opts.workspace // keep the project it serves
		case here != "":
			wsDir, guessed = here, true
		default:
			r.line(uc.name, "skipped", uc.title+" has no project: run flyctl setup in a Flutter project, or flyctl setup --client "+uc.name+" --workspace DIR, to set fly up for one")
			return false
		}
	}
	want, err := uc.want(self, wsDir, opts, c.getenv)
	if err != nil {
		r.fail(uc.name, err)
		return false
	}
	if hasFly && current(have, want, c.getenv) {
		r.line(uc.name, "ok", "runs this flyctl ("+st.file+")")
		return true
	}
	done, would := "added", "would add"
	if hasFly {
		done, would = "updated", "would update"
	}
	if guessed {
		done += " for " + wsDir + " (this directory's project; --workspace DIR names another)"
		would += " for " + wsDir + " (this directory's project; --workspace DIR names another)"
	}
	if dryRun {
		how := "edit " + st.file
		if st.cli != "" && uc.addArgv != nil {
			if argv := uc.addArgv(st.cli, serverName, want); cliRunnable(st.cli, argv[1:]) {
				how = showArgv(argv)
			}
		}
		r.did(uc.name, done, would, how)
		return true
	}
	how, err := st.setFly(ctx, h, c.getenv, want)
	if err != nil {
		r.fail(uc.name, err)
		return false
	}
	r.did(uc.name, done, would, how)
	r.next = append(r.next, uc.title+": "+uc.after)
	return true
}

// currentProject is the Flutter project the current directory is in, for
// a client that has no project of its own (Claude Desktop): the nearest
// directory with a pubspec.yaml, as flyctl mcp finds it; "" outside one,
// or where a session could not be bound (home, /).
func currentProject(home string) string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	if wd, err = filepath.EvalSymlinks(wd); err != nil {
		return ""
	}
	if h, err := filepath.EvalSymlinks(home); err == nil {
		home = h
	}
	root := paths.ProjectRoot(wd, home)
	if _, err := os.Stat(filepath.Join(root, "pubspec.yaml")); err != nil || paths.CheckRoot(root, home) != nil {
		return ""
	}
	return root
}

// dartServer reports whether s runs dart mcp-server.
func dartServer(s mcpconfig.Server) bool {
	if !s.Stdio() || len(s.Args) == 0 || s.Args[0] != "mcp-server" {
		return false
	}
	base := strings.ToLower(s.Command[strings.LastIndexAny(s.Command, `/\`)+1:])
	return slices.Contains([]string{"dart", "dart.exe", "dart.bat"}, base)
}

// dartMinVersion is the first Dart whose mcp-server is stable.
const dartMinVersion = "3.9.0"

var reDartVersion = regexp.MustCompile(`Dart SDK version: (\S+)`)

// dartVersion is the version `dart --version` prints (on stdout, or on
// stderr as older SDKs do).
func dartVersion(ctx context.Context, h *host, dart string, getenv func(string) string) (string, error) {
	stdout, stderr, err := h.run(ctx, []string{dart, "--version"}, programEnv(getenv))
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", dart, err)
	}
	m := reDartVersion.FindSubmatch(append(stdout, stderr...))
	if m == nil {
		return "", fmt.Errorf("%s --version did not print a Dart SDK version", dart)
	}
	return string(m[1]), nil
}

// dartUpstream is the upstream that shares dart mcp-server: by name, so
// that it runs the dart on the PATH of the first client of a workspace.
var dartUpstream = mcpconfig.Server{Name: "dart", Command: "dart", Args: []string{"mcp-server"}}

// setupDart offers to share dart mcp-server through fly, and to remove
// the own dart mcp-server entries of the clients that now have fly.
func setupDart(ctx context.Context, c *call, h *host, r *report, withFly []*clientState, o *setupOptions) {
	dart := findProgram("dart", c.getenv)
	if dart == "" {
		return // nothing to offer; doctor does not ask for dart either
	}
	r.section("dart mcp-server:")
	version, err := dartVersion(ctx, h, dart, c.getenv)
	if err != nil {
		r.line("dart", "skipped", err.Error())
		return
	}
	if v, ok := compareVersions(version, dartMinVersion); !ok || v < 0 {
		r.line("dart", "skipped", fmt.Sprintf("Dart %s: its mcp-server is stable from %s on", version, dartMinVersion))
		return
	}
	upFile, err := upstreamsFile(c)
	if err != nil {
		r.fail("dart", err)
		return
	}
	f, err := mcpconfig.ReadFile(upFile)
	if err != nil {
		r.fail("dart", err)
		return
	}
	shared := ""
	for _, s := range f.Servers {
		if s.Name == dartUpstream.Name || dartServer(s) {
			shared = s.Name
			break
		}
	}
	type removal struct {
		st   *clientState
		name string
	}
	var remove []removal
	for _, st := range withFly {
		for _, n := range st.names {
			if n != serverName && dartServer(st.servers[n]) {
				remove = append(remove, removal{st, n})
			}
		}
	}
	if shared != "" && len(remove) == 0 {
		r.line("dart", "ok", fmt.Sprintf("Dart %s: shared through fly (upstream %q in %s)", version, shared, upFile))
		return
	}
	var plan []string
	if shared == "" {
		plan = append(plan, fmt.Sprintf("add the upstream dart (dart mcp-server) to %s: its tools appear as dart_* in every client", upFile))
	}
	for _, rm := range remove {
		plan = append(plan, fmt.Sprintf("remove %s's own %q entry (%s) from %s: fly serves its tools", rm.st.uc.name, rm.name, strings.Join(append([]string{rm.st.servers[rm.name].Command}, rm.st.servers[rm.name].Args...), " "), rm.st.file))
	}
	yes := o.yes
	switch {
	case yes:
	case o.dryRun:
		r.line("dart", "offer", fmt.Sprintf("Dart %s: share dart mcp-server through fly, one analysis server per project for every agent:", version))
		for _, p := range plan {
			r.more("- " + p)
		}
		r.more("(setup asks on a terminal; --yes does it)")
		return
	case h.interactive():
		fmt.Fprintf(r.w, "  Dart %s: share dart mcp-server through fly, one analysis server per project for every agent?\n", version)
		for _, p := range plan {
			fmt.Fprintf(r.w, "    - %s\n", p)
		}
		fmt.Fprint(r.w, "  Do it? [y/N] ")
		line, _ := bufio.NewReader(c.stdin).ReadString('\n')
		answer := strings.ToLower(strings.TrimSpace(line))
		yes = answer == "y" || answer == "yes"
		if !yes {
			r.line("dart", "declined", "nothing changed; flyctl setup --yes does it")
			return
		}
	default:
		r.line("dart", "offer", fmt.Sprintf("Dart %s: share dart mcp-server through fly, one analysis server per project for every agent:", version))
		for _, p := range plan {
			r.more("- " + p)
		}
		r.more("not asked (no terminal): run flyctl setup --yes to do it")
		return
	}
	if shared == "" {
		if o.dryRun {
			r.did("dart", "", "would share", "add the upstream dart to "+upFile)
		} else if err := editUpstreams(upFile, func(f *mcpconfig.File) error { f.Put(dartUpstream); return nil }); err != nil {
			r.fail("dart", err)
			return
		} else {
			r.did("dart", "shared", "", "added the upstream dart (dart mcp-server) to "+upFile+"; its tools appear as dart_*")
			r.undo = append(r.undo, "stop sharing dart: flyctl upstream remove dart")
		}
	}
	for _, rm := range remove {
		s := rm.st.servers[rm.name]
		restore := restoreHint(rm.st, rm.name, s)
		if o.dryRun {
			r.did(rm.st.uc.name, "", "would remove", fmt.Sprintf("its own %q (dart mcp-server) from %s", rm.name, rm.st.file))
			continue
		}
		how, err := rm.st.removeServer(ctx, h, c.getenv, rm.name)
		if err != nil {
			r.fail(rm.st.uc.name, err)
			continue
		}
		r.did(rm.st.uc.name, "removed", "", fmt.Sprintf("its own %q (dart mcp-server): %s", rm.name, how))
		r.undo = append(r.undo, fmt.Sprintf("give %s its own %q again: %s", rm.st.uc.name, rm.name, restore))
	}
}

// restoreHint says how to add the server s back to a client.
func restoreHint(st *clientState, name string, s mcpconfig.Server) string {
	e := serverEntry{Command: s.Command, Args: s.Args, Env: s.Env}
	if st.cli != "" && st.uc.addArgv != nil {
		return showArgv(st.uc.addArgv(st.cli, name, e))
	}
	b, _ := json.Marshal(map[string]serverEntry{name: e})
	return fmt.Sprintf("add %s to %s", b, st.file)
}

// serviceState is what flyctl service status --json says of svc's
// service.
func serviceState(ctx context.Context, svc *serviceCmd) (serviceStatus, error) {
	var st serviceStatus
	sc := *svc
	var out bytes.Buffer
	sc.stdout, sc.stderr = &out, io.Discard
	if err := sc.status(ctx, nil, &serviceStatusOptions{json: true}); err != nil {
		return st, err
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return st, fmt.Errorf("read the service's status: %w", err)
	}
	return st, nil
}

// serviceCurrent reports whether the installed service runs the flyd
// install would write now.
func serviceCurrent(st serviceStatus) bool {
	return st.Installed && st.Flyd != "" && st.CurrentFlyd != "" && samePath(st.Flyd, st.CurrentFlyd)
}

// svc is the flyctl service of the call: a test's, else the machine's.
func (c *call) svc() *serviceCmd {
	if c.service != nil {
		return c.service
	}
	return newServiceCmd(c)
}

// setupService installs the login service, or replaces one that runs
// another flyd, with flyctl service install's code.
func setupService(ctx context.Context, c *call, r *report, o *setupOptions) {
	svc := c.svc()
	st, err := serviceState(ctx, svc)
	if err != nil {
		r.line("service", "skipped", err.Error())
		return
	}
	// A unit of the user's own where the package's would do is stale: it
	// would outlive the package.
	ownOverPackaged := st.PackagedUnit != "" && !st.Packaged
	stale := st.Installed && (!serviceCurrent(st) || ownOverPackaged)
	if st.Installed && !stale {
		r.line("service", "ok", fmt.Sprintf("installed and current (%s, %s)", st.Unit, st.State))
		if st.Manager != "Run key" && !st.Packaged && st.Path != st.CurrentPath {
			r.more("its PATH is not this shell's; flyctl service install --force bakes this one in (and restarts flyd)")
		}
		return
	}
	if o.dryRun {
		flyd := st.CurrentFlyd
		if flyd == "" {
			r.fail("service", errors.New("no flyd binary next to flyctl or on PATH; put flyd in the same directory as flyctl"))
			return
		}
		switch {
		case stale && ownOverPackaged:
			r.did("service", "", "would update", fmt.Sprintf("%s: flyctl service install --force removes it for the package's %s, which runs %s (restarting flyd)", st.Unit, st.PackagedUnit, flyd))
		case stale:
			r.did("service", "", "would update", fmt.Sprintf("%s: it runs %s; flyctl service install --force makes it run %s (restarting flyd)", st.Unit, st.Flyd, flyd))
		case st.PackagedUnit != "":
			r.did("service", "", "would enable", fmt.Sprintf("%s (%s, the package's unit), running %s", st.PackagedUnit, st.Manager, flyd))
		default:
			r.did("service", "", "would install", fmt.Sprintf("%s (%s), running %s", st.Unit, st.Manager, flyd))
		}
		return
	}
	sc := *svc
	var out, warn bytes.Buffer
	sc.stdout, sc.stderr = &out, &warn
	err = sc.install(ctx, nil, &serviceInstallOptions{force: stale, allowRoot: o.allowRoot})
	if err != nil {
		r.fail("service", err)
		if warn.Len() > 0 {
			r.more(strings.TrimSpace(warn.String()))
		}
		return
	}
	done := "installed"
	first, rest, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	if detail, ok := strings.CutPrefix(first, "enabled "); ok { // the package's unit
		done, first = "enabled", detail
	}
	if stale {
		done = "updated"
	}
	r.did("service", done, "", strings.TrimPrefix(first, "installed "))
	if rest != "" {
		r.more(rest)
	}
	if warn.Len() > 0 {
		r.more(strings.TrimSpace(warn.String()))
	}
}
