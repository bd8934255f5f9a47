package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file holds the fake MCP clients' commands that setup, doctor and
// uninstall tests put on PATH: this test binary, linked (or copied) as
// claude, codex, gemini, code, dart and a rival flyctl. With FLY_FAKE_CLI
// set to a log file, it acts as the command its name says: it appends its
// argv to the log, checks it as the real command parses it, and writes
// what the real one writes. The syntax is the real commands' as checked
// against Claude Code 2.1.197, Codex 0.171.0 and Gemini CLI 0.61.0
// (installed from npm, run against scratch homes) and VS Code's source
// (McpManagementCli, McpResourceScannerService):
//
//	claude mcp add [--scope user] NAME -- COMMAND ARGS...   fails if NAME exists
//	claude mcp remove --scope user NAME                      fails if it does not
//	codex mcp add NAME -- COMMAND ARGS...                    replaces NAME
//	codex mcp remove NAME                                    exit 0 either way
//	gemini mcp add --scope user NAME COMMAND [ARG [-- ARGS...]]  replaces NAME
//	gemini mcp remove --scope user NAME                      exit 0 either way
//	code --add-mcp '{"name": NAME, ...}'                      replaces NAME
func init() {
	log := os.Getenv("FLY_FAKE_CLI")
	if log == "" {
		return
	}
	name := strings.TrimSuffix(strings.ToLower(filepath.Base(os.Args[0])), ".exe")
	args := os.Args[1:]
	if f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		b, _ := json.Marshal(append([]string{name}, args...))
		f.Write(append(b, '\n'))
		f.Close()
	}
	os.Exit(fakeCLI(name, args, os.Stdout, os.Stderr))
}

func fakeCLI(name string, args []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, format+"\n", a...)
		return 1
	}
	home := os.Getenv("HOME")
	if h := os.Getenv("USERPROFILE"); h != "" && os.Getenv("HOME") == "" {
		home = h
	}
	switch {
	case name == "dart" && len(args) == 1 && args[0] == "--version":
		fmt.Fprintln(stdout, `Dart SDK version: 3.9.0 (stable) (Mon Aug 11 07:58:10 2025 -0700) on "linux_x64"`)
		return 0
	case name == "flyctl" && len(args) == 1 && args[0] == "version":
		fmt.Fprintln(stdout, "flyctl v0.3.164 linux/amd64 Commit: f767253a8e91ffc2706346c8366b597dfc455a98 BuildDate: 2025-07-30T12:20:14Z")
		return 0
	case name == "claude" && len(args) >= 2 && args[0] == "mcp":
		file := filepath.Join(home, ".claude.json")
		if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
			file = filepath.Join(d, ".claude.json")
		}
		scope, rest, err := fakeScope(args[2:], "local")
		if err != nil {
			return fail("error: %v", err)
		}
		if scope != "user" {
			return fail("fake claude: only --scope user is faked, got %q", scope)
		}
		switch args[1] {
		case "add":
			// <name> <commandOrUrl> [args...]; after --, all are its.
			if len(rest) < 3 || rest[1] != "--" {
				return fail("error: fake claude wants NAME -- COMMAND ARGS..., got %q", rest)
			}
			return fakeEditJSON(file, "mcpServers", func(servers map[string]any) error {
				if _, ok := servers[rest[0]]; ok {
					return fmt.Errorf("MCP server %s already exists in user config", rest[0])
				}
				servers[rest[0]] = map[string]any{"type": "stdio", "command": rest[2], "args": fakeArgs(rest[3:]), "env": map[string]any{}}
				return nil
			}, "  ", stderr)
		case "remove":
			if len(rest) != 1 {
				return fail("error: fake claude wants remove NAME")
			}
			return fakeEditJSON(file, "mcpServers", func(servers map[string]any) error {
				if _, ok := servers[rest[0]]; !ok {
					return fmt.Errorf("No MCP server named %q in user scope", rest[0])
				}
				delete(servers, rest[0])
				return nil
			}, "  ", stderr)
		}
	case name == "gemini" && len(args) >= 2 && args[0] == "mcp":
		dir := home
		if d := os.Getenv("GEMINI_CLI_HOME"); d != "" {
			dir = d
		}
		file := filepath.Join(dir, ".gemini", "settings.json")
		scope, rest, err := fakeScope(args[2:], "project")
		if err != nil {
			return fail("%v", err)
		}
		if scope != "user" {
			return fail("fake gemini: only --scope user is faked, got %q", scope)
		}
		switch args[1] {
		case "add":
			// <name> <commandOrUrl> [args...]: a "--" before the
			// command leaves too few non-option arguments; after it,
			// everything is an argument.
			if len(rest) < 2 || rest[0] == "--" || rest[1] == "--" {
				return fail("Not enough non-option arguments: got 1, need at least 2")
			}
			var cmdArgs []string
			for i, a := range rest[2:] {
				if a == "--" {
					cmdArgs = append(cmdArgs, rest[2+i+1:]...)
					break
				}
				if strings.HasPrefix(a, "-") {
					return fail("fake gemini: %q would be read as an option of gemini's", a)
				}
				cmdArgs = append(cmdArgs, a)
			}
			return fakeEditJSON(file, "mcpServers", func(servers map[string]any) error {
				servers[rest[0]] = map[string]any{"command": rest[1], "args": fakeArgs(cmdArgs)}
				return nil
			}, "  ", stderr)
		case "remove":
			if len(rest) != 1 {
				return fail("fake gemini wants remove NAME")
			}
			return fakeEditJSON(file, "mcpServers", func(servers map[string]any) error {
				delete(servers, rest[0])
				return nil
			}, "  ", stderr)
		}
	case name == "codex" && len(args) >= 3 && args[0] == "mcp":
		file := filepath.Join(home, ".codex", "config.toml")
		if d := os.Getenv("CODEX_HOME"); d != "" {
			file = filepath.Join(d, "config.toml")
		}
		b, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail("%v", err)
		}
		text := fakeCutTOMLTable(string(b), args[2])
		switch {
		case args[1] == "add" && len(args) >= 5 && args[3] == "--":
			quoted := make([]string, len(args)-5)
			for i, a := range args[5:] {
				quoted[i] = fmt.Sprintf("%q", a)
			}
			if text != "" {
				text = strings.TrimRight(text, "\n") + "\n\n"
			}
			text += fmt.Sprintf("[mcp_servers.%s]\ncommand = %q\nargs = [%s]\n", args[2], args[4], strings.Join(quoted, ", "))
			fmt.Fprintf(stdout, "Added global MCP server '%s'.\n", args[2])
		case args[1] == "remove" && len(args) == 3:
			if !strings.Contains(string(b), "[mcp_servers."+args[2]+"]") {
				fmt.Fprintf(stdout, "No MCP server named '%s' found.\n", args[2])
				return 0
			}
			fmt.Fprintf(stdout, "Removed global MCP server '%s'.\n", args[2])
		default:
			return fail("fake codex: unexpected %q", args)
		}
		os.MkdirAll(filepath.Dir(file), 0o755)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			return fail("%v", err)
		}
		return 0
	case name == "code" && len(args) == 2 && args[0] == "--add-mcp":
		var def map[string]any
		if err := json.Unmarshal([]byte(args[1]), &def); err != nil {
			return fail("Invalid JSON '%s': %v", args[1], err)
		}
		name, _ := def["name"].(string)
		if name == "" {
			return fail("Missing name property in %s", args[1])
		}
		if def["command"] == nil && def["url"] == nil {
			return fail("Missing command or URL property in %s", args[1])
		}
		delete(def, "name")
		dir, err := vscodeUserDir(os.Getenv)
		if err != nil {
			return fail("%v", err)
		}
		return fakeEditJSON(filepath.Join(dir, "mcp.json"), "servers", func(servers map[string]any) error {
			servers[name] = def
			return nil
		}, "\t", stderr)
	}
	return fail("fake %s: unexpected arguments %q", name, args)
}

// fakeScope takes -s/--scope (default def) out of args.
func fakeScope(args []string, def string) (string, []string, error) {
	scope := def
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return scope, append(rest, args[i:]...), nil
		case a == "-s" || a == "--scope":
			if i+1 >= len(args) {
				return "", nil, errors.New("option '--scope <scope>' argument missing")
			}
			scope = args[i+1]
			i++
		case strings.HasPrefix(a, "-") && len(rest) == 0:
			return "", nil, fmt.Errorf("unknown option '%s'", a)
		default:
			rest = append(rest, a)
		}
	}
	return scope, rest, nil
}

func fakeArgs(a []string) []any {
	out := make([]any, len(a))
	for i, s := range a {
		out[i] = s
	}
	return out
}

// fakeEditJSON rewrites file with edit applied to its servers object, as
// the real commands do: the whole file re-encoded.
func fakeEditJSON(file, key string, edit func(map[string]any) error, indent string, stderr io.Writer) int {
	doc := map[string]any{}
	b, err := os.ReadFile(file)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &doc); err != nil {
			fmt.Fprintf(stderr, "Error in %s: %v\n", file, err)
			return 52
		}
	}
	servers, _ := doc[key].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	if err := edit(servers); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	doc[key] = servers
	out, _ := json.MarshalIndent(doc, "", indent)
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, out, 0o600); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// fakeCutTOMLTable removes [mcp_servers.NAME] and its subtables, up to the
// next other table: the fake's own, simple take on codex's edit.
func fakeCutTOMLTable(text, name string) string {
	var out []string
	skip := false
	for _, line := range strings.SplitAfter(text, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "[") {
			skip = t == "[mcp_servers."+name+"]" || strings.HasPrefix(t, "[mcp_servers."+name+".")
		}
		if !skip {
			out = append(out, line)
		}
	}
	text = strings.Join(out, "")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return strings.TrimRight(text, "\n") + "\n"
}

// linkFake puts the fake command name into dir: a link to this test
// binary, or a copy where links are refused.
func linkFake(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+exeSuffix)
	if err := os.Symlink(self, p); err == nil {
		if _, err := os.Stat(p); err == nil { // Wine reports links it did not make
			return p
		}
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeLog is the argv of each fake command run, in order.
func fakeLog(t *testing.T, log string) [][]string {
	t.Helper()
	b, err := os.ReadFile(log)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			t.Fatal(err)
		}
		out = append(out, argv)
	}
	return out
}
