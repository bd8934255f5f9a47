package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/toolfilter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// configMCPAbout is what flyctl config mcp --help says it does.
const configMCPAbout = `Prints the MCP configuration that makes an editor run "flyctl mcp", as a
whole config file; with --write, merges it into the editor's config file
instead. CLIENT is one of:

  claude       Claude Desktop: claude_desktop_config.json in
               ~/.config/Claude (Linux) or ~/Library/Application Support/Claude
               (macOS). It has no project, so the server gets --workspace DIR
               (default: the current directory), flyctl's absolute path, and
               the PATH (and FLUTTER_ROOT, ANDROID_HOME, … when set) of this
               shell, since Claude Desktop does not start servers from one.
  claude-code  Claude Code: .mcp.json in the project (DIR), run in the project.
               "claude mcp add --scope project fly -- flyctl mcp" does the same.
  cursor       Cursor: .cursor/mcp.json in the project, with ${workspaceFolder}.
  vscode       VS Code: .vscode/mcp.json in the project ("servers", "type": "stdio").

--tools and --disable put a tool filter into the config (flyctl mcp's
flags, or the URL's ?tools= and ?disable=): that editor then sees only
those tools of the shared flyd; see flyctl mcp --help for the presets.

--write adds or replaces only the "fly" server: other servers and every
other key are kept (the file is re-indented with two spaces), the file is
replaced atomically (a temporary file and a rename; a symlink's target is
written), and a file that is not valid JSON (comments included) is left
alone with an error. Where the snippet went is reported on stderr.

--http configures the URL form instead, for editors that speak MCP over
HTTP (claude-code, cursor, vscode): Streamable HTTP at flyd's loopback
address with ?workspace=DIR, and an Authorization header that reads the
token from the FLY_TOKEN environment variable (the token itself is never
written into the file): export FLY_TOKEN="$(flyctl token print)" where
the editor starts.

--import moves the editor's own stdio MCP servers (dart mcp-server, …)
into flyd's upstreams.json, so that flyd runs each once per workspace for
every client, and leaves only "fly" (flyctl mcp) in the editor's file;
their tools then appear as NAME_<tool>. URL servers stay. It prints the
plan; with --write it applies it, backing the editor's file up first.`

// mcpClient is an editor that runs MCP servers from a JSON config file.
type mcpClient struct {
	name     string
	key      string // the object of servers: "mcpServers" or "servers"
	typed    bool   // entries carry "type": "stdio"
	global   bool   // the file is the user's, not the project's; needs --workspace and an absolute flyctl
	file     string // relative to the project, for project clients
	args     []string
	howToUse string // printed on stderr after the snippet
}

var mcpClients = []mcpClient{
	{name: "claude", key: "mcpServers", global: true,
		howToUse: "restart Claude Desktop to load it"},
	{name: "claude-code", key: "mcpServers", typed: true, file: ".mcp.json", args: []string{"mcp"},
		howToUse: "Claude Code asks to approve project servers on its next start; or run: claude mcp add --scope project fly -- flyctl mcp"},
	{name: "cursor", key: "mcpServers", file: filepath.Join(".cursor", "mcp.json"), args: []string{"mcp", "--workspace", "${workspaceFolder}"},
		howToUse: "enable it under Cursor Settings > MCP"},
	{name: "vscode", key: "servers", typed: true, file: filepath.Join(".vscode", "mcp.json"), args: []string{"mcp", "--workspace", "${workspaceFolder}"},
		howToUse: "start it from the MCP: List Servers command, or from the file's CodeLens"},
}

func findMCPClient(name string) (mcpClient, bool) {
	i := slices.IndexFunc(mcpClients, func(c mcpClient) bool { return c.name == name })
	if i < 0 {
		return mcpClient{}, false
	}
	return mcpClients[i], true
}

func mcpClientNames() string {
	names := make([]string, len(mcpClients))
	for i, c := range mcpClients {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// serverName is the key of flyctl's entry in an editor's servers.
const serverName = "fly"

// serverEntry is the config of one stdio MCP server, in the order the
// editors' documentation shows the keys.
type serverEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

type configOptions struct {
	client    string
	workspace string
	flyctl    string
	write     bool
	imp       bool
	http      bool
	tools     []string
	disable   []string
}

func (o *configOptions) flags(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVar(&o.client, "client", "", "the editor `CLIENT`: "+mcpClientNames())
	fs.StringVar(&o.workspace, "workspace", "", "the project `DIR` (default: the current directory)")
	fs.StringVar(&o.flyctl, "flyctl", "", "the flyctl `PATH` the editor runs (default: flyctl on the editor's PATH; for claude, this flyctl's absolute path)")
	fs.BoolVar(&o.write, "write", false, "merge the server into the editor's config file instead of printing it")
	fs.BoolVar(&o.http, "http", false, "configure the URL form (MCP Streamable HTTP on flyd's loopback listener, with the token from $FLY_TOKEN) instead of flyctl mcp")
	fs.StringSliceVar(&o.tools, "tools", nil, "only these tools for this editor: presets ("+presetNames()+"), categories, names or globs (see flyctl mcp --help)")
	fs.StringSliceVar(&o.disable, "disable", nil, "leave these tools out for this editor: names, categories or globs (repeatable)")
	fs.BoolVar(&o.imp, "import", false, "move the editor's own stdio servers into flyd's upstreams.json, leaving flyctl mcp in their place (prints the plan; --write applies it, keeping a backup)")
}

func cmdConfigMCP(_ context.Context, c *call, o *configOptions) error {
	getenv, stdout, stderr := c.getenv, c.stdout, c.stderr
	if err := c.noArgs(); err != nil {
		return err
	}
	if o.client == "" {
		return usagef("config mcp needs --client: %s", mcpClientNames())
	}
	mc, ok := findMCPClient(o.client)
	if !ok {
		return usagef("config mcp: unknown --client %q; want one of %s", o.client, mcpClientNames())
	}
	dir, err := configDir(o.workspace)
	if err != nil {
		return err
	}
	if _, err := toolfilter.Parse(o.tools, o.disable); err != nil {
		return usagef("config mcp: %v", err)
	}
	entry, err := mc.entry(o.flyctl, dir, getenv)
	if err != nil {
		return err
	}
	entry.Args = append(slices.Clone(entry.Args), filterArgs(o.tools, o.disable)...)
	if o.imp {
		return importServers(mc, dir, entry, o.write, getenv, stdout, stderr)
	}
	var server any = entry
	if o.http {
		if server, err = mc.httpEntry(dir, o.tools, o.disable, getenv); err != nil {
			return err
		}
	}
	if !o.write {
		doc, err := marshalIndented(map[string]map[string]any{mc.key: {serverName: server}})
		if err != nil {
			return err
		}
		if _, err := stdout.Write(doc); err != nil {
			return err
		}
		where := "its config file"
		if name, err := mc.path(dir, getenv); err == nil {
			where = name
		}
		fmt.Fprintf(stderr, "flyctl: merge this into %s (flyctl config mcp --client %s --write does it); then %s\n", where, mc.name, mc.howToUse)
		return nil
	}
	name, err := mc.path(dir, getenv)
	if err != nil {
		return err
	}
	changed, err := mergeServer(name, mc.key, server)
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(stderr, "flyctl: %s already has the %q server; nothing to do\n", name, serverName)
		return nil
	}
	fmt.Fprintf(stderr, "flyctl: wrote the %q server to %s; %s\n", serverName, name, mc.howToUse)
	return nil
}

// filterArgs are the flyctl mcp flags of a tool filter.
func filterArgs(tools, disable []string) []string {
	var args []string
	if len(tools) > 0 {
		args = append(args, "--tools", strings.Join(tools, ","))
	}
	if len(disable) > 0 {
		args = append(args, "--disable", strings.Join(disable, ","))
	}
	return args
}

// configDir is --workspace (or the current directory), absolute and
// checked to be a directory.
func configDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("find the current directory: %w (pass --workspace DIR)", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usagef("config mcp: --workspace: %v", err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", usagef("config mcp: --workspace: %s does not exist", dir)
	case err != nil:
		return "", usagef("config mcp: --workspace: %v", err)
	case !fi.IsDir():
		return "", usagef("config mcp: --workspace: %s is not a directory", dir)
	}
	return abs, nil
}

// entry is the server config for this client.
func (mc mcpClient) entry(flyctl, dir string, getenv func(string) string) (serverEntry, error) {
	e := serverEntry{Command: flyctl, Args: mc.args}
	if mc.typed {
		e.Type = "stdio"
	}
	if !mc.global {
		if e.Command == "" {
			e.Command = "flyctl"
		}
		return e, nil
	}
	if e.Command == "" {
		self, err := selfPath(getenv)
		if err != nil {
			return e, err
		}
		e.Command = self
	} else if !filepath.IsAbs(e.Command) {
		abs, err := filepath.Abs(e.Command)
		if err != nil {
			return e, usagef("config mcp: --flyctl: %v", err)
		}
		e.Command = abs
	}
	e.Args = []string{"mcp", "--workspace", dir}
	for _, k := range flutterEnvNames {
		if v := getenv(k); v != "" && k != "HOME" {
			if e.Env == nil {
				e.Env = map[string]string{}
			}
			e.Env[k] = v
		}
	}
	return e, nil
}

// httpEntry is the URL form of the fly server: Streamable HTTP at
// flyd's loopback address, the workspace in the query, and the token
// from the FLY_TOKEN variable, never written into the file (project
// files get committed).
func (mc mcpClient) httpEntry(dir string, tools, disable []string, getenv func(string) string) (any, error) {
	if mc.global {
		return nil, usagef("config mcp --http: Claude Desktop takes remote servers as connectors in its settings, not in its config file; use flyctl mcp (drop --http)")
	}
	addr, err := configuredListen(getenv)
	if err != nil {
		return nil, err
	}
	q := url.Values{"workspace": {dir}}
	if len(tools) > 0 {
		q.Set("tools", strings.Join(tools, ","))
	}
	if len(disable) > 0 {
		q.Set("disable", strings.Join(disable, ","))
	}
	u := "http://" + addr + wire.RouteStreamable + "?" + q.Encode()
	auth := "Bearer ${FLY_TOKEN}"
	if mc.name == "cursor" || mc.name == "vscode" {
		auth = "Bearer ${env:FLY_TOKEN}"
	}
	type httpServer struct {
		Type    string            `json:"type,omitempty"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	e := httpServer{URL: u, Headers: map[string]string{"Authorization": auth}}
	if mc.typed {
		e.Type = "http"
	}
	return e, nil
}

// configuredListen is the address an editor's config may name: flyd's
// configured one. When flyd's own port was taken at its start and it
// listens on another, the config is refused: that port is flyd's only
// until it restarts, and the editor would later send its token to
// whoever holds it then. With no flyd running, the default is named.
func configuredListen(getenv func(string) string) (string, error) {
	lc, err := newClient(getenv)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := lc.Status(ctx)
	if err != nil {
		var ae *localclient.APIError
		if errors.As(err, &ae) {
			return "", fmt.Errorf("config mcp --http: ask flyd where it listens: %w", err)
		}
		return wire.DefaultListen, nil // no flyd to ask
	}
	switch {
	case st.HTTPWanted != "":
		return "", fmt.Errorf("config mcp --http: flyd's port %s was taken when it started, so it listens on %s for now; "+
			"an editor config naming %s would later send its token to whoever holds that port. "+
			"Free %s and restart flyd (flyctl service restart), or give flyd a free port (flyd run --listen 127.0.0.1:PORT), then run this again",
			st.HTTPWanted, st.HTTP, st.HTTP, st.HTTPWanted)
	case st.HTTP == "":
		return "", errors.New("config mcp --http: flyd has no loopback listener (it was started with --listen \"\"); use flyctl mcp (drop --http), or restart flyd with --listen")
	}
	return st.HTTP, nil
}

// flutterEnvNames are the variables a generated editor config pins for
// flutter, for editors that start servers with a bare environment.
var flutterEnvNames = wire.ToolchainEnv

// selfPath is the absolute path of this flyctl, preferring the one on
// PATH when it is the same file: a stable link (/usr/local/bin/flyctl)
// outlives the versioned path it points to.
func selfPath(getenv func(string) string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find flyctl's own path: %w (pass --flyctl PATH)", err)
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		return self, nil
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		cand := filepath.Join(dir, "flyctl"+exeSuffix)
		if fi, err := os.Stat(cand); err == nil && os.SameFile(fi, selfInfo) {
			return cand, nil
		}
	}
	if p, err := exec.LookPath(self); err == nil {
		return p, nil
	}
	return self, nil
}

// path is the config file this client reads.
func (mc mcpClient) path(dir string, getenv func(string) string) (string, error) {
	if !mc.global {
		return filepath.Join(dir, mc.file), nil
	}
	return claudeDesktopConfig(getenv)
}

// marshalIndented encodes v with two-space indentation, without HTML
// escaping, and a final newline.
func marshalIndented(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// jsonObject is a JSON object that keeps its keys in order and its values as
// they were written (numbers keep their precision), so that a config file
// comes back from a merge with only the merged key changed.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

var errNotObject = errors.New("its top level is not a JSON object")

// parseObject reads a JSON object; empty input (or only whitespace) is
// an empty object, as editors create such files.
func parseObject(b []byte) (*jsonObject, error) {
	o := &jsonObject{vals: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(b)) == 0 {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected %v", tok)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(key, v) // a repeated key: the last wins, as JavaScript reads it
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("there is more after the top-level object")
	}
	return o, nil
}

func (o *jsonObject) set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// marshal writes the object compactly, keys in order.
func (o *jsonObject) marshal() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		_ = enc.Encode(k) // a string always encodes
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// mergeServer sets servers key.fly to entry in the config file name,
// keeping everything else, and reports whether the file changed. It
// refuses a file that is not a valid JSON object.
func mergeServer(name, key string, entry any) (changed bool, err error) {
	orig, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	refuse := func(why error) error {
		return fmt.Errorf("%s is not valid JSON for an MCP config (%v); flyctl does not overwrite it: fix it, or add the %q server by hand (drop --write to print it)", name, why, serverName)
	}
	doc, err := parseObject(orig)
	if err != nil {
		return false, refuse(err)
	}
	servers := &jsonObject{vals: map[string]json.RawMessage{}}
	if raw, ok := doc.vals[key]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if servers, err = parseObject(raw); err != nil {
			return false, refuse(fmt.Errorf("%q is not an object", key))
		}
	}
	want, err := json.Marshal(entry)
	if err != nil {
		return false, err
	}
	if have, ok := servers.vals[serverName]; ok && sameJSON(have, want) {
		return false, nil
	}
	servers.set(serverName, want)
	doc.set(key, servers.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, doc.marshal(), "", "  "); err != nil {
		return false, fmt.Errorf("merge into %s: %w", name, err)
	}
	out.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return false, fmt.Errorf("write %s: %w", name, err)
	}
	// The editor may have written the file meanwhile: do not lose that.
	now, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	if !bytes.Equal(now, orig) {
		return false, fmt.Errorf("%s changed while flyctl was merging into it; run the command again", name)
	}
	if err := writeFileAtomic(name, out.Bytes(), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", name, err)
	}
	return true, nil
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// importServers prints, or with write applies, the move of the editor's
// stdio servers into flyd's upstreams.json.
func importServers(mc mcpClient, dir string, fly serverEntry, write bool, getenv func(string) string, stdout, stderr io.Writer) error {
	name, err := mc.path(dir, getenv)
	if err != nil {
		return err
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	if p.Upstreams() == "" {
		return errors.New("cannot find your config directory: set HOME, XDG_CONFIG_HOME or " + paths.EnvConfigDir)
	}
	plan, err := planImport(mc, name, p.Upstreams(), fly)
	if err != nil {
		return err
	}
	plan.print(stdout)
	if !write {
		fmt.Fprintf(stderr, "flyctl: nothing written; run again with --write to apply this\n")
		return nil
	}
	if err := plan.apply(stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "flyctl: %s\n", mc.howToUse)
	return nil
}
