package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/spf13/pflag"
)

// This file knows the MCP clients that flyctl setup, doctor and uninstall
// look after, at user scope: where each keeps its servers, how it runs
// them, and the client's own command for adding and removing one where it
// has one. Each was checked against the client's own CLI or source:
//
//   - Claude Code 2.1: claude mcp add --scope user NAME -- COMMAND ARGS...
//     writes ~/.claude.json (or $CLAUDE_CONFIG_DIR/.claude.json)
//     mcpServers.NAME {"type": "stdio", "command", "args", "env": {}}; it
//     fails when NAME exists, so a stale entry is removed first (claude mcp
//     remove --scope user NAME). It starts servers in the project.
//   - Codex 0.17x: codex mcp add NAME -- COMMAND ARGS... writes (or
//     replaces) [mcp_servers.NAME] in ~/.codex/config.toml (or
//     $CODEX_HOME/config.toml), keeping the rest of the file; codex mcp
//     remove NAME. It starts servers in the directory codex runs in.
//   - Gemini CLI 0.6x: gemini mcp add --scope user NAME COMMAND ARGS...
//     (a "--" after the first argument passes later ones that look like
//     flags) writes or replaces mcpServers.NAME in ~/.gemini/settings.json
//     (or $GEMINI_CLI_HOME/.gemini/settings.json), comments kept; gemini
//     mcp remove --scope user NAME.
//   - VS Code: code --add-mcp '{"name": NAME, ...}' writes (or replaces)
//     servers.NAME in the user profile's mcp.json, which it rewrites
//     tab-indented; it has no command to remove one, so that is an edit of
//     the file. User servers start in the home directory, so the entry
//     names the project: --workspace ${workspaceFolder}.
//   - Cursor (~/.cursor/mcp.json, which also takes ${workspaceFolder}),
//     Windsurf (~/.codeium/windsurf/mcp_config.json) and Claude Desktop
//     have no command: their file is edited, as config mcp --write does.
//
// Claude Desktop has no project: its entry binds the workspace that
// setup's --workspace names. flyctl mcp binds its session to a workspace
// before the client says anything, so the client's MCP roots could not
// choose it; without --workspace, setup leaves Claude Desktop alone and
// says so.

// A userClient is an MCP client as flyctl setup sees it.
type userClient struct {
	name  string // for --client
	title string // for people
	cli   string // its command for MCP servers, "" when it has none
	toml  bool   // its file is Codex's config.toml; else JSON under key
	key   string // the object of servers in its JSON file
	typed bool   // its entries carry "type": "stdio"
	args  []string
	// needsWorkspace: the client has no project (Claude Desktop), so
	// its entry binds one (setup --workspace) and pins the environment.
	needsWorkspace bool
	// addReplaces: the CLI's add replaces an entry of the same name (Claude
	// Code's fails instead).
	addReplaces bool
	file        func(getenv func(string) string) (string, error)
	// marks are the paths of which any tells that the client is
	// installed, besides its command on PATH.
	marks func(getenv func(string) string) []string
	// addArgv is the CLI's command line that adds (or replaces) name
	// running command args; removeArgv the one that removes it. nil:
	// the file is edited instead.
	addArgv    func(cli, name string, e serverEntry) []string
	removeArgv func(cli, name string) []string
	after      string // what the user does for the change to take effect
}

// userClients are the clients setup knows, in the order it reports them.
var userClients = []userClient{
	{
		name: "claude-code", title: "Claude Code", cli: "claude", key: "mcpServers", typed: true, args: []string{"mcp"},
		file: func(getenv func(string) string) (string, error) {
			if d := getenv("CLAUDE_CONFIG_DIR"); filepath.IsAbs(d) {
				return filepath.Join(d, ".claude.json"), nil
			}
			return inHome(getenv, ".claude.json")
		},
		marks: func(getenv func(string) string) []string {
			if d := getenv("CLAUDE_CONFIG_DIR"); filepath.IsAbs(d) {
				return []string{d}
			}
			return append(homePaths(getenv, ".claude"), homePaths(getenv, ".claude.json")...)
		},
		addArgv: func(cli, name string, e serverEntry) []string {
			return append([]string{cli, "mcp", "add", "--scope", "user", name, "--", e.Command}, e.Args...)
		},
		removeArgv: func(cli, name string) []string {
			return []string{cli, "mcp", "remove", "--scope", "user", name}
		},
		after: "new Claude Code sessions have it (/mcp lists it)",
	},
	{
		name: "claude", title: "Claude Desktop", key: "mcpServers", needsWorkspace: true,
		file: claudeDesktopConfig,
		marks: func(getenv func(string) string) []string {
			if f, err := claudeDesktopConfig(getenv); err == nil {
				return []string{filepath.Dir(f)}
			}
			return nil
		},
		after: "restart Claude Desktop",
	},
	{
		name: "cursor", title: "Cursor", key: "mcpServers", args: []string{"mcp", "--workspace", "${workspaceFolder}"},
		file: func(getenv func(string) string) (string, error) {
			return inHome(getenv, ".cursor", "mcp.json")
		},
		marks: func(getenv func(string) string) []string { return homePaths(getenv, ".cursor") },
		after: "enable it under Cursor Settings > MCP",
	},
	{
		name: "vscode", title: "VS Code", cli: "code", key: "servers", typed: true, addReplaces: true,
		args: []string{"mcp", "--workspace", "${workspaceFolder}"},
		file: func(getenv func(string) string) (string, error) {
			dir, err := vscodeUserDir(getenv)
			return filepath.Join(dir, "mcp.json"), err
		},
		marks: func(getenv func(string) string) []string {
			if dir, err := vscodeUserDir(getenv); err == nil {
				return []string{dir}
			}
			return nil
		},
		addArgv: func(cli, name string, e serverEntry) []string {
			def := struct {
				Name string `json:"name"`
				serverEntry
			}{name, e}
			b, _ := json.Marshal(def) // a serverEntry always encodes
			return []string{cli, "--add-mcp", string(b)}
		},
		after: "start it from the MCP: List Servers command",
	},
	{
		name: "codex", title: "Codex", cli: "codex", toml: true, addReplaces: true, args: []string{"mcp"},
		file: func(getenv func(string) string) (string, error) {
			if d := getenv("CODEX_HOME"); filepath.IsAbs(d) {
				return filepath.Join(d, "config.toml"), nil
			}
			return inHome(getenv, ".codex", "config.toml")
		},
		marks: func(getenv func(string) string) []string {
			if d := getenv("CODEX_HOME"); filepath.IsAbs(d) {
				return []string{d}
			}
			return homePaths(getenv, ".codex")
		},
		addArgv: func(cli, name string, e serverEntry) []string {
			return append([]string{cli, "mcp", "add", name, "--", e.Command}, e.Args...)
		},
		removeArgv: func(cli, name string) []string { return []string{cli, "mcp", "remove", name} },
		after:      "new Codex sessions have it (/mcp lists it)",
	},
	{
		name: "gemini", title: "Gemini CLI", cli: "gemini", key: "mcpServers", addReplaces: true, args: []string{"mcp"},
		file: func(getenv func(string) string) (string, error) {
			if d := getenv("GEMINI_CLI_HOME"); filepath.IsAbs(d) {
				return filepath.Join(d, ".gemini", "settings.json"), nil
			}
			return inHome(getenv, ".gemini", "settings.json")
		},
		marks: func(getenv func(string) string) []string {
			if d := getenv("GEMINI_CLI_HOME"); filepath.IsAbs(d) {
				return []string{filepath.Join(d, ".gemini")}
			}
			return homePaths(getenv, ".gemini")
		},
		addArgv: func(cli, name string, e serverEntry) []string {
			argv := []string{cli, "mcp", "add", "--scope", "user", name, e.Command}
			if len(e.Args) > 0 {
				argv = append(argv, e.Args[0])
				if len(e.Args) > 1 {
					argv = append(append(argv, "--"), e.Args[1:]...)
				}
			}
			return argv
		},
		removeArgv: func(cli, name string) []string {
			return []string{cli, "mcp", "remove", "--scope", "user", name}
		},
		after: "new Gemini CLI sessions have it (/mcp lists it)",
	},
	{
		name: "windsurf", title: "Windsurf", key: "mcpServers", args: []string{"mcp"},
		file: func(getenv func(string) string) (string, error) {
			return inHome(getenv, ".codeium", "windsurf", "mcp_config.json")
		},
		marks: func(getenv func(string) string) []string { return homePaths(getenv, ".codeium", "windsurf") },
		after: "refresh the MCP servers in Windsurf's Cascade panel",
	},
}

func userClientNames() string {
	names := make([]string, len(userClients))
	for i, uc := range userClients {
		names[i] = uc.name
	}
	return strings.Join(names, ", ")
}

// pickClients is the clients --client names (all when none), in table
// order; an unknown name is a usage error.
func pickClients(cmd string, names []string) ([]userClient, error) {
	if len(names) == 0 {
		return userClients, nil
	}
	for _, n := range names {
		if !slices.ContainsFunc(userClients, func(uc userClient) bool { return uc.name == n }) {
			return nil, usagef("%s: unknown --client %q; want one of %s", cmd, n, userClientNames())
		}
	}
	var out []userClient
	for _, uc := range userClients {
		if slices.Contains(names, uc.name) {
			out = append(out, uc)
		}
	}
	return out, nil
}

// inHome is a path under the user's home directory.
func inHome(getenv func(string) string, elem ...string) (string, error) {
	home := userHome(getenv)
	if !filepath.IsAbs(home) {
		return "", errors.New("cannot find your home directory: HOME is not set to an absolute path")
	}
	return filepath.Join(append([]string{home}, elem...)...), nil
}

// homePaths is inHome's path as a list: of none when there is no home.
func homePaths(getenv func(string) string, elem ...string) []string {
	if p, err := inHome(getenv, elem...); err == nil {
		return []string{p}
	}
	return nil
}

// clientState is what flyctl finds of one client.
type clientState struct {
	uc      userClient
	present bool
	cli     string // its command, found on PATH; "" when absent
	file    string
	exists  bool // the file exists
	orig    []byte
	json    *jsonDoc
	toml    *codexConfig
	names   []string                    // its servers, in file order
	servers map[string]mcpconfig.Server // by name
	err     error                       // the file could not be read
}

// inspect finds the client: whether it is installed, its command, and its
// file's servers.
func (uc userClient) inspect(getenv func(string) string) *clientState {
	st := &clientState{uc: uc, servers: map[string]mcpconfig.Server{}}
	if uc.cli != "" {
		st.cli = findProgram(uc.cli, getenv)
	}
	st.present = st.cli != ""
	for _, m := range uc.marks(getenv) {
		if _, err := os.Stat(m); err == nil {
			st.present = true
		}
	}
	st.file, st.err = uc.file(getenv)
	if st.err != nil {
		return st
	}
	st.err = st.read()
	return st
}

// read (re)reads the client's file.
func (st *clientState) read() error {
	st.names, st.servers, st.json, st.toml = nil, map[string]mcpconfig.Server{}, nil, nil
	b, err := readBounded(st.file, maxClientFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.exists, st.orig = false, nil
	case err != nil:
		return err
	default:
		st.exists, st.orig = true, b
	}
	if st.uc.toml {
		c, err := parseCodexConfig(st.orig)
		if err != nil {
			return fmt.Errorf("%s: %w", st.file, err)
		}
		st.toml = c
		for _, s := range c.servers {
			st.names = append(st.names, s.name)
			srv := mcpconfig.Server{Name: s.name, Command: s.command, Args: s.args}
			if !s.argsOK {
				srv.Args = []string{"?"} // not flyctl's: args it cannot read
			}
			st.servers[s.name] = srv
		}
		return nil
	}
	d, err := parseJSONDoc(st.orig, st.uc.key)
	if err != nil {
		return fmt.Errorf("%s: %w", st.file, err)
	}
	st.json = d
	names, raw := d.entries()
	for _, n := range names {
		var s mcpconfig.Server
		if err := json.Unmarshal(raw[n], &s); err != nil {
			s = mcpconfig.Server{} // not a server flyctl can read: not ours
		}
		s.Name = n
		st.names = append(st.names, n)
		st.servers[n] = s
	}
	return nil
}

// readBounded reads a file of at most max bytes.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d MiB; flyctl does not read it", name, max>>20)
	}
	return b, nil
}

// flyctlEntry reports whether s runs flyctl mcp: a program named flyctl
// given "mcp" and only flyctl mcp's own flags, and returns those flags. An
// entry of fly.io's flyctl ("flyctl mcp server ...") is not one.
func flyctlEntry(s mcpconfig.Server) (mcpOptions, bool) {
	var o mcpOptions
	if !s.Stdio() || len(s.Args) == 0 || s.Args[0] != "mcp" {
		return o, false
	}
	base := s.Command[strings.LastIndexAny(s.Command, `/\`)+1:]
	base = strings.TrimSuffix(strings.ToLower(base), ".exe")
	if base != "flyctl" {
		return o, false
	}
	fs := pflag.NewFlagSet("mcp", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.flags(fs)
	if err := fs.Parse(s.Args[1:]); err != nil || fs.NArg() > 0 {
		return o, false
	}
	return o, true
}

// want is the entry that runs this flyctl (self) for the client, keeping
// the tool filter of the client's present entry (have, when it is
// flyctl's); dir is the workspace of a client without projects.
func (uc userClient) want(self, dir string, have *mcpOptions, getenv func(string) string) (serverEntry, error) {
	e := serverEntry{Command: self, Args: slices.Clone(uc.args)}
	if uc.needsWorkspace {
		mc, _ := findMCPClient("claude")
		var err error
		if e, err = mc.entry(self, dir, getenv); err != nil {
			return e, err
		}
	}
	if uc.typed {
		e.Type = "stdio"
	}
	if have != nil {
		e.Args = append(e.Args, filterArgs(have.tools, have.disable)...)
	}
	return e, nil
}

// current reports whether the server s is the entry want: the same flyctl
// (by path, or the file a link or PATH leads to), arguments and, where
// want pins one, environment.
func current(s mcpconfig.Server, want serverEntry, getenv func(string) string) bool {
	if _, ok := flyctlEntry(s); !ok || !sameProgram(s.Command, want.Command, getenv) || !slices.Equal(s.Args, want.Args) {
		return false
	}
	return want.Env == nil || maps.Equal(s.Env, want.Env)
}

// sameProgram reports whether command (a path, or a name looked up on
// PATH) is the program at path self.
func sameProgram(command, self string, getenv func(string) string) bool {
	p := command
	if !filepath.IsAbs(p) {
		if strings.ContainsAny(p, `/\`) {
			return false // relative to a directory the client chooses
		}
		if p = findProgram(p, getenv); p == "" {
			return false
		}
	}
	if samePath(p, self) {
		return true
	}
	a, errA := os.Stat(p)
	b, errB := os.Stat(self)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// findProgram finds the program name on PATH (as getenv gives it), as the
// OS would run it (with PATHEXT's extensions on Windows), or returns "".
func findProgram(name string, getenv func(string) string) string {
	return findProgramIn(name, filepath.SplitList(getenv("PATH")), getenv)
}

// findProgramIn finds the program name in the absolute directories dirs.
func findProgramIn(name string, dirs []string, getenv func(string) string) string {
	all := findProgramsIn(name, dirs, getenv)
	if len(all) == 0 {
		return ""
	}
	return all[0]
}

// findProgramsIn is every program named name in dirs, in order.
func findProgramsIn(name string, dirs []string, getenv func(string) string) []string {
	var out []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue // like os/exec, never a program relative to the cwd
		}
		for _, n := range programNames(name, getenv) {
			if p := filepath.Join(d, n); checkExecutable(p) == nil && !slices.Contains(out, p) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// selfExecutable is this flyctl's absolute path with symlinks resolved,
// as setup writes it into clients' files.
func selfExecutable(h *host) (string, error) {
	exe, err := h.executable()
	if err == nil {
		exe, err = filepath.Abs(exe)
	}
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("find flyctl's own path: %w", err)
	}
	return exe, nil
}

// setFly adds or replaces the client's "fly" server with want: through
// the client's command where it has one (and one that Windows can run
// with these arguments), else by editing its file. It returns what it
// did, for people.
func (st *clientState) setFly(ctx context.Context, h *host, getenv func(string) string, want serverEntry) (string, error) {
	uc := st.uc
	if st.cli != "" && uc.addArgv != nil {
		argv := uc.addArgv(st.cli, serverName, want)
		if cliRunnable(st.cli, argv[1:]) {
			_, had := st.servers[serverName]
			if had && !uc.addReplaces {
				if err := st.runCLI(ctx, h, getenv, uc.removeArgv(st.cli, serverName)); err != nil {
					return "", err
				}
			}
			if err := st.runCLI(ctx, h, getenv, argv); err != nil {
				return "", err
			}
			if err := st.read(); err != nil {
				return "", err
			}
			if s, ok := st.servers[serverName]; !ok || !current(s, want, getenv) {
				return "", fmt.Errorf("ran %s, but %s does not have the entry it should have written; add it by hand: %s", showArgv(argv), st.file, showEntry(want))
			}
			return showArgv(argv), nil
		}
	}
	var out []byte
	var err error
	if uc.toml {
		out, err = st.toml.setServer(serverName, want.Command, want.Args)
	} else {
		out, err = st.json.set(serverName, want)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w; add the %q server by hand: %s", st.file, err, serverName, showEntry(want))
	}
	if err := st.write(out); err != nil {
		return "", err
	}
	return "edited " + st.file, nil
}

// removeServer removes the client's server name: through the client's
// command where it has one, else by editing its file.
func (st *clientState) removeServer(ctx context.Context, h *host, getenv func(string) string, name string) (string, error) {
	uc := st.uc
	if st.cli != "" && uc.removeArgv != nil {
		argv := uc.removeArgv(st.cli, name)
		if cliRunnable(st.cli, argv[1:]) {
			if err := st.runCLI(ctx, h, getenv, argv); err != nil {
				return "", err
			}
			if err := st.read(); err != nil {
				return "", err
			}
			if _, ok := st.servers[name]; ok {
				return "", fmt.Errorf("ran %s, but %s still has %q; remove it by hand", showArgv(argv), st.file, name)
			}
			return showArgv(argv), nil
		}
	}
	var out []byte
	var found bool
	var err error
	if uc.toml {
		out, found, err = st.toml.removeServer(name)
	} else {
		out, found, err = st.json.remove(name)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w; remove %q by hand", st.file, err, name)
	}
	if !found {
		return "", nil
	}
	if err := st.write(out); err != nil {
		return "", err
	}
	return "edited " + st.file, nil
}

// write replaces the client's file with out, atomically, unless it
// changed since it was read; then it reads it again.
func (st *clientState) write(out []byte) error {
	now, err := os.ReadFile(st.file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", st.file, err)
	}
	if !bytes.Equal(now, st.orig) || (err == nil) != st.exists {
		return fmt.Errorf("%s changed while flyctl was editing it; run the command again", st.file)
	}
	if err := os.MkdirAll(filepath.Dir(st.file), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", st.file, err)
	}
	if err := writeFileAtomic(st.file, out, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", st.file, err)
	}
	return st.read()
}

// runCLI runs the client's command argv, which changes its file.
func (st *clientState) runCLI(ctx context.Context, h *host, getenv func(string) string, argv []string) error {
	stdout, stderr, err := h.run(ctx, argv, programEnv(getenv))
	if err != nil {
		msg := strings.TrimSpace(string(stderr) + "\n" + string(stdout))
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		return fmt.Errorf("%s: %w: %s", showArgv(argv), err, safetext.Lines(msg))
	}
	return nil
}

// showArgv is argv as a person would type it in a POSIX shell, its
// program by name.
func showArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 {
			a = filepath.Base(a)
		}
		words[i] = shellQuote(a)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(isBareKeyChar(r) || strings.ContainsRune("/.:=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// showEntry is an entry as JSON on one line.
func showEntry(e serverEntry) string {
	b, _ := json.Marshal(map[string]serverEntry{serverName: e})
	return string(b)
}

// host is what setup, doctor and uninstall need of the machine besides
// its environment: the real one, or a test's.
type host struct {
	executable  func() (string, error) // this flyctl's binary
	interactive func() bool            // a person answers questions on stdin
	// run runs a program (a client's command, dart, another flyctl) to
	// its end and returns its output.
	run func(ctx context.Context, argv, env []string) (stdout, stderr []byte, err error)

	notice sync.Once // the notice that an older flyd answers: once
}

// machine is the host the call acts on: a test's, else the real one.
func (c *call) machine() *host {
	if c.host == nil {
		stdin := c.stdin
		c.host = &host{
			executable:  os.Executable,
			interactive: func() bool { return stdinIsTerminal(stdin) },
			run:         runProgram,
		}
	}
	return c.host
}

// stdinIsTerminal reports whether r is a terminal a person types into
// (not a pipe, a file or the null device).
func stdinIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// programTimeout bounds one run of another program: node-based CLIs take
// seconds to start.
const programTimeout = 2 * time.Minute

// maxProgramOutput bounds what is kept of a program's output.
const maxProgramOutput = 64 << 10

// runProgram runs argv with env in a process group of its own, with no
// stdin, and returns the start of its output.
func runProgram(ctx context.Context, argv, env []string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return proc.SignalGroup(cmd.Process.Pid, proc.Kill) }
	cmd.WaitDelay = 5 * time.Second
	if err := proc.StartGroup(cmd); err != nil {
		return nil, nil, err
	}
	err := cmd.Wait()
	proc.Release(cmd.Process.Pid)
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (gave up after %s)", err, programTimeout)
	}
	return stdout.b, stderr.b, err
}

// capped keeps the first maxProgramOutput bytes written to it.
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxProgramOutput - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// programEnv is the environment other programs get: flyctl's, with the
// variables that say where the clients keep their files as getenv gives
// them.
func programEnv(getenv func(string) string) []string {
	env := environ(getenv)
	have := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	for _, k := range []string{"USERPROFILE", "APPDATA", "LOCALAPPDATA", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "PATHEXT", "SystemRoot"} {
		if v := getenv(k); v != "" && !have[k] {
			env = append(env, k+"="+v)
		}
	}
	return env
}
