package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wire"
)

// setupEnv is a machine for setup, doctor and uninstall: a scratch home
// (HOME, USERPROFILE, APPDATA, XDG_CONFIG_HOME under it), flyctl and flyd
// in a bin directory, the fake client commands on PATH (clients_fake_test.go),
// and the service tests' fake service manager.
type setupEnv struct {
	*svcTest
	dir     string // the temp directory everything is in
	realDir string // dir with symlinks resolved
	sockDir string
	rival   string // a directory with fly.io's flyctl, put first on PATH by withRival
	log     string // the fake commands' argv
	self    string // this flyctl
	h       *host
	// installed reports whether the service was installed: the fake
	// manager was asked to, or (Windows) the Run key holds fly's value.
	installed func() bool
}

func newSetupEnv(t *testing.T) *setupEnv {
	t.Helper()
	var s *svcTest
	var installed func() bool
	if runtime.GOOS == "windows" {
		rk := newRunKeySvcTest(t)
		s = rk.svcTest
		installed = func() bool { _, err := rk.key.get("fly"); return err == nil }
	} else {
		s = newSvcTest(t, "linux")
		installed = func() bool { return s.mgr != nil && slices.Contains(s.mgr.calls, "install") }
	}
	e := &setupEnv{svcTest: s, dir: filepath.Dir(s.home), installed: installed}
	var err error
	// Setup writes flyctl's path with symlinks resolved (macOS's temp
	// directory is under one).
	if e.self, err = filepath.EvalSymlinks(filepath.Join(s.bin, "flyctl"+exeSuffix)); err != nil {
		t.Fatal(err)
	}
	if e.realDir, err = filepath.EvalSymlinks(e.dir); err != nil {
		t.Fatal(err)
	}
	if e.sockDir, err = os.MkdirTemp("", "fly"); err != nil { // short enough for a socket path
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(e.sockDir) })
	e.log = filepath.Join(e.dir, "fake.log")
	t.Setenv("FLY_FAKE_CLI", e.log)
	for k, v := range map[string]string{
		"HOME":            s.home,
		"USERPROFILE":     s.home,
		"APPDATA":         filepath.Join(s.home, "AppData", "Roaming"),
		"XDG_CONFIG_HOME": filepath.Join(s.home, ".config"),
		"PATH":            s.bin,
		"FLY_SOCKET":      filepath.Join(e.sockDir, "flyd.sock"),
		"FLY_STATE_DIR":   filepath.Join(e.dir, "state"),
		"FLY_CONFIG_DIR":  filepath.Join(e.dir, "config"),
		"FLY_FAKE_CLI":    e.log,
	} {
		s.env[k] = v
	}
	for _, k := range []string{"SystemRoot", "PATHEXT"} { // what Windows programs need
		if v := os.Getenv(k); v != "" {
			s.env[k] = v
		}
	}
	if err := os.MkdirAll(s.home, 0o755); err != nil {
		t.Fatal(err)
	}
	e.h = &host{
		executable:  func() (string, error) { return e.self, nil },
		interactive: func() bool { return false },
		run:         runProgram,
	}
	return e
}

// fakes puts the fake commands named on PATH.
func (e *setupEnv) fakes(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		linkFake(t, e.bin, n)
	}
}

// withRival puts fly.io's flyctl first on PATH.
func (e *setupEnv) withRival(t *testing.T) {
	t.Helper()
	e.rival = filepath.Join(e.dir, "rival")
	linkFake(t, e.rival, "flyctl")
	e.env["PATH"] = e.rival + string(filepath.ListSeparator) + e.env["PATH"]
}

// write writes a file under home.
func (e *setupEnv) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.home, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// read reads a file under home ("" when there is none).
func (e *setupEnv) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.home, filepath.FromSlash(rel)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// run runs flyctl args with stdin on e, and returns its output and exit
// code.
func (e *setupEnv) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &call{getenv: e.getenv, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, service: e.serviceCmd, host: e.h}
	err := dispatch(context.Background(), c, commands(), args)
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// tree is every file under the temp directory with a hash of its
// content (the fake commands' log left out).
func (e *setupEnv) tree(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == e.log || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[p] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, h := range after {
		if before[p] != h {
			t.Errorf("%s changed %s", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s removed %s", what, p)
		}
	}
}

// normalize replaces the test's paths and version in output.
func (e *setupEnv) normalize(s string) string {
	s = strings.ReplaceAll(s, e.home, "<HOME>")
	s = strings.ReplaceAll(s, e.sockDir, "<SOCKDIR>")
	s = strings.ReplaceAll(s, e.dir, "<TMP>")
	s = strings.ReplaceAll(s, e.realDir, "<TMP>")
	s = strings.ReplaceAll(s, wire.Version, "<VERSION>")
	s = strings.ReplaceAll(s, string(filepath.Separator), "/")
	return strings.ReplaceAll(s, ".exe", "")
}

// The clients' files before setup: each with something of its own that
// setup and uninstall must keep.
const (
	claudeCodeBefore = `{
  "numStartups": 3,
  "mcpServers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}
  }
}
`
	claudeDesktopBefore = `{
  "globalShortcut": "Alt+Space",
  "mcpServers": {
    "flyctl": {
      "command": "/usr/local/bin/flyctl",
      "args": ["mcp", "server"]
    }
  }
}
`
	cursorBefore = `{
  // Cursor's own comment
  "mcpServers": {
    "dart": {"command": "dart", "args": ["mcp-server"]},
    "notes": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/dev/notes"]}
  }
}
`
	codexBefore = `# my Codex settings
model = "o3"  # the model

[mcp_servers.dart]
command = "dart"
args = [
  "mcp-server",  # stable since Dart 3.9
]

[profiles.fast]
model = "gpt-5-mini"
`
	windsurfBefore = "{\r\n  \"mcpServers\": {}\r\n}\r\n"
)

func (e *setupEnv) clientsBefore(t *testing.T) {
	t.Helper()
	e.fakes(t, "claude", "codex", "gemini", "code", "dart")
	e.write(t, ".claude.json", claudeCodeBefore)
	desktop, err := claudeDesktopConfig(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(e.home, desktop)
	e.write(t, filepath.ToSlash(rel), claudeDesktopBefore)
	e.write(t, ".cursor/mcp.json", cursorBefore)
	e.write(t, ".codex/config.toml", codexBefore)
	e.write(t, ".codeium/windsurf/mcp_config.json", windsurfBefore)
	// VS Code and Gemini CLI have no file yet: their commands make it.
}

func TestSetupEndToEnd(t *testing.T) {
	e := newSetupEnv(t)
	e.clientsBefore(t)
	golden := runtime.GOOS != "windows" // the service there is the Run key's

	// --dry-run shows everything and changes nothing.
	before := e.tree(t)
	out, errs, code := e.run(t, "", "setup", "--dry-run")
	if code != 0 {
		t.Fatalf("setup --dry-run exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/dry_run.golden", e.normalize(out))
	}
	sameTree(t, "setup --dry-run", before, e.tree(t))
	for _, argv := range fakeLog(t, e.log) {
		if argv[0] != "dart" {
			t.Errorf("setup --dry-run ran %q", argv)
		}
	}
	if e.mgr != nil && len(e.mgr.calls) > 0 {
		t.Errorf("setup --dry-run asked the service manager to %v", e.mgr.calls)
	}
	os.Remove(e.log)

	// The first run registers fly everywhere and installs the service;
	// without a terminal it offers dart's sharing without doing it.
	out, errs, code = e.run(t, "", "setup")
	if code != 0 {
		t.Fatalf("setup exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/first.golden", e.normalize(out))
	}
	var clis [][]string
	for _, argv := range fakeLog(t, e.log) {
		if argv[0] != "dart" {
			clis = append(clis, argv)
		}
	}
	vscodeDef, _ := json.Marshal(struct {
		Name string `json:"name"`
		serverEntry
	}{"fly", serverEntry{Type: "stdio", Command: e.self, Args: []string{"mcp", "--workspace", "${workspaceFolder}"}}})
	want := [][]string{
		{"claude", "mcp", "add", "--scope", "user", "fly", "--", e.self, "mcp"},
		{"code", "--add-mcp", string(vscodeDef)},
		{"codex", "mcp", "add", "fly", "--", e.self, "mcp"},
		{"gemini", "mcp", "add", "--scope", "user", "fly", e.self, "mcp"},
	}
	if !slices.EqualFunc(clis, want, slices.Equal) {
		t.Errorf("setup ran\n%q\nwant\n%q", clis, want)
	}
	// Each client's file has fly, running this flyctl by its path, and
	// everything it had.
	for _, uc := range userClients {
		st := uc.inspect(e.getenv)
		s, ok := st.servers["fly"]
		if uc.name == "claude" {
			if ok {
				t.Errorf("setup without --workspace gave Claude Desktop a fly entry: %+v", s)
			}
			continue
		}
		if !ok || s.Command != e.self || s.Args[0] != "mcp" {
			t.Errorf("%s's fly after setup = %+v (%v), want %s mcp", uc.name, s, st.err, e.self)
		}
	}
	if got := e.read(t, ".cursor/mcp.json"); !strings.HasPrefix(got, "{\n  // Cursor's own comment\n  \"mcpServers\": {\n    \"dart\": {\"command\": \"dart\", \"args\": [\"mcp-server\"]},\n    \"notes\": {\"command\": \"npx\",") {
		t.Errorf("setup did not keep the rest of Cursor's file as it was:\n%s", got)
	}
	if got := e.read(t, ".codex/config.toml"); !strings.HasPrefix(got, codexBefore) {
		t.Errorf("setup did not keep the rest of Codex's file:\n%s", got)
	}
	if got, want := e.read(t, ".codeium/windsurf/mcp_config.json"), "{\r\n  \"mcpServers\": {\r\n    \"fly\": {\r\n      \"command\": \""+jsonText(e.self)+"\",\r\n      \"args\": [\r\n        \"mcp\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n"; got != want {
		t.Errorf("Windsurf's file after setup =\n%q\nwant\n%q", got, want)
	}
	if !e.installed() {
		t.Errorf("setup did not install the service")
	}

	// A second run changes nothing, and says so.
	os.Remove(e.log)
	before = e.tree(t)
	out, errs, code = e.run(t, "", "setup")
	if code != 0 {
		t.Fatalf("setup again exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/again.golden", e.normalize(out))
	}
	if !strings.Contains(out, "Nothing to change: fly is set up.") {
		t.Errorf("setup again does not say it changed nothing:\n%s", out)
	}
	sameTree(t, "setup again", before, e.tree(t))
	for _, argv := range fakeLog(t, e.log) {
		if argv[0] != "dart" {
			t.Errorf("setup again ran %q", argv)
		}
	}

	// --yes shares dart mcp-server and removes the clients' own.
	out, errs, code = e.run(t, "", "setup", "--yes", "--no-service")
	if code != 0 {
		t.Fatalf("setup --yes exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/yes.golden", e.normalize(out))
	}
	up, err := mcpconfig.ReadFile(filepath.Join(e.dir, "config", "upstreams.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := up.Server("dart"); !ok || s.Command != "dart" || !slices.Equal(s.Args, []string{"mcp-server"}) {
		t.Errorf("upstreams.json after setup --yes = %+v, want dart: dart mcp-server", up.Servers)
	}
	for _, name := range []string{"cursor", "codex"} {
		uc, _ := pickClients("test", []string{name})
		st := uc[0].inspect(e.getenv)
		if _, ok := st.servers["dart"]; ok {
			t.Errorf("%s still has its own dart after setup --yes", name)
		}
		if _, ok := st.servers["fly"]; !ok {
			t.Errorf("%s lost fly", name)
		}
	}
	if got := e.read(t, ".cursor/mcp.json"); !strings.Contains(got, `"notes": {"command": "npx"`) {
		t.Errorf("removing Cursor's dart touched its other servers:\n%s", got)
	}

	// Claude Desktop, for a project.
	proj := filepath.Join(e.dir, "proj")
	os.MkdirAll(proj, 0o755)
	out, errs, code = e.run(t, "", "setup", "--client", "claude", "--workspace", proj, "--no-service")
	if code != 0 || !strings.Contains(out, "claude       added") {
		t.Fatalf("setup --client claude --workspace exits %d:\n%s%s", code, out, errs)
	}
	desktop, _ := pickClients("test", []string{"claude"})
	st := desktop[0].inspect(e.getenv)
	if s := st.servers["fly"]; s.Command != e.self || !slices.Equal(s.Args, []string{"mcp", "--workspace", proj}) || s.Env["PATH"] != e.env["PATH"] {
		t.Errorf("Claude Desktop's fly = %+v, want %s mcp --workspace %s with this PATH", s, e.self, proj)
	}
	if s := st.servers["flyctl"]; s.Command != "/usr/local/bin/flyctl" {
		t.Errorf("setup touched fly.io's flyctl entry: %+v", s)
	}
	// Again without --workspace: it keeps the project it serves.
	if out, _, code := e.run(t, "", "setup", "--client", "claude", "--no-service"); code != 0 || !strings.Contains(out, "claude       ok") {
		t.Errorf("setup --client claude again: exit %d\n%s", code, out)
	}

	// doctor, with fly.io's flyctl first on PATH and flutter in
	// FLUTTER_ROOT.
	e.withRival(t)
	svcWriteExecutable(t, filepath.Join(e.env["FLUTTER_ROOT"], "bin", "flutter"+map[bool]string{true: ".bat"}[runtime.GOOS == "windows"]))
	out, errs, code = e.run(t, "", "doctor")
	if code != 0 {
		t.Errorf("doctor exits %d, want 0 (warnings only); stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/doctor.golden", e.normalize(out))
	}
	if !strings.Contains(out, "fly.io's flyctl v0.3.164") {
		t.Errorf("doctor does not name the rival flyctl:\n%s", out)
	}

	// uninstall --dry-run changes nothing; uninstall removes fly alone.
	before = e.tree(t)
	out, errs, code = e.run(t, "", "uninstall", "--dry-run")
	if code != 0 {
		t.Fatalf("uninstall --dry-run exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	sameTree(t, "uninstall --dry-run", before, e.tree(t))
	if golden {
		checkGolden(t, "setup/uninstall_dry_run.golden", e.normalize(out))
	}
	out, errs, code = e.run(t, "", "uninstall")
	if code != 0 {
		t.Fatalf("uninstall exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if golden {
		checkGolden(t, "setup/uninstall.golden", e.normalize(out))
	}
	for _, uc := range userClients {
		if st := uc.inspect(e.getenv); st.servers["fly"].Command != "" {
			t.Errorf("%s still has fly after uninstall", uc.name)
		}
	}
	// What setup did not add is as it was, byte for byte where flyctl
	// edited the file itself.
	if got, want := e.read(t, ".cursor/mcp.json"), strings.Replace(cursorBefore, "    \"dart\": {\"command\": \"dart\", \"args\": [\"mcp-server\"]},\n", "", 1); got != want {
		t.Errorf("Cursor's file after uninstall =\n%s\nwant\n%s", got, want)
	}
	if got := e.read(t, ".codeium/windsurf/mcp_config.json"); got != windsurfBefore {
		t.Errorf("Windsurf's file after uninstall = %q, want %q", got, windsurfBefore)
	}
	if got, want := e.read(t, filepath.ToSlash(mustRel(t, e.home, st.file))), claudeDesktopBefore; got != want {
		t.Errorf("Claude Desktop's file after uninstall =\n%s\nwant\n%s", got, want)
	}
	cc, _ := pickClients("test", []string{"claude-code"})
	if st := cc[0].inspect(e.getenv); st.servers["github"].URL == "" {
		t.Errorf("uninstall removed Claude Code's other server")
	}
	if svcFileExists(svcPlatform(t, e.goos, e.home).file) {
		t.Errorf("uninstall left the service's unit")
	}
	out, _, code = e.run(t, "", "uninstall")
	if code != 0 || !strings.Contains(out, "Nothing to remove.") {
		t.Errorf("uninstall again: exit %d\n%s", code, out)
	}
}

func mustRel(t *testing.T, base, p string) string {
	t.Helper()
	rel, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// TestSetupKeepsOthers: a "fly" that is not flyctl mcp is left alone; a
// stale fly (another flyctl) is replaced, its tool filter kept.
func TestSetupKeepsOthers(t *testing.T) {
	e := newSetupEnv(t)
	e.fakes(t, "claude")
	e.write(t, ".claude.json", `{"mcpServers": {"fly": {"type": "stdio", "command": "/old/bin/flyctl", "args": ["mcp", "--tools", "app"], "env": {}}}}`)
	cursor := `{"mcpServers": {"fly": {"command": "/usr/local/bin/flyctl", "args": ["mcp", "server", "--claude"]}}}`
	e.write(t, ".cursor/mcp.json", cursor)
	out, errs, code := e.run(t, "", "setup", "--client", "claude-code", "--client", "cursor", "--no-service")
	if code != 0 {
		t.Fatalf("setup exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if !strings.Contains(out, "claude-code  updated") || !strings.Contains(out, "cursor       skipped") {
		t.Errorf("setup says:\n%s\nwant claude-code updated and cursor skipped", out)
	}
	if got := e.read(t, ".cursor/mcp.json"); got != cursor {
		t.Errorf("setup changed a fly that is not flyctl mcp:\n%s", got)
	}
	want := [][]string{
		{"claude", "mcp", "remove", "--scope", "user", "fly"},
		{"claude", "mcp", "add", "--scope", "user", "fly", "--", e.self, "mcp", "--tools", "app"},
	}
	if got := fakeLog(t, e.log); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("setup ran %q, want %q", got, want)
	}
	// uninstall leaves the other fly alone too.
	out, _, code = e.run(t, "", "uninstall", "--client", "cursor")
	if code != 0 || !strings.Contains(out, "left alone") || e.read(t, ".cursor/mcp.json") != cursor {
		t.Errorf("uninstall --client cursor: exit %d\n%s", code, out)
	}
}

// TestSetupClaudeDesktopHere: Claude Desktop has no project of its own;
// setup run in a Flutter project gives it that one, says so, and a later
// run elsewhere keeps it. Outside a project it is skipped, saying how.
func TestSetupClaudeDesktopHere(t *testing.T) {
	e := newSetupEnv(t)
	desktop, err := claudeDesktopConfig(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(e.home, desktop)
	e.write(t, filepath.ToSlash(rel), claudeDesktopBefore)
	proj := filepath.Join(e.dir, "app")
	e.write(t, "../app/pubspec.yaml", "name: app\n")
	e.write(t, "../app/lib/main.dart", "void main() {}\n")
	if real, err := filepath.EvalSymlinks(proj); err == nil {
		proj = real
	}
	t.Chdir(filepath.Join(proj, "lib")) // as a user in their project would be
	out, errs, code := e.run(t, "", "setup", "--client", "claude", "--no-service")
	if code != 0 || !strings.Contains(out, "claude       added for "+proj+" (this directory's project") {
		t.Fatalf("setup --client claude in a project exits %d:\n%s%s", code, out, errs)
	}
	cs, _ := pickClients("test", []string{"claude"})
	if s := cs[0].inspect(e.getenv).servers["fly"]; !slices.Equal(s.Args, []string{"mcp", "--workspace", proj}) {
		t.Errorf("Claude Desktop's fly = %+v, want it to serve %s", s, proj)
	}
	// From another project, the project it serves stays.
	e.write(t, "../other/pubspec.yaml", "name: other\n")
	t.Chdir(filepath.Join(e.dir, "other"))
	if out, _, code := e.run(t, "", "setup", "--client", "claude", "--no-service"); code != 0 || !strings.Contains(out, "claude       ok") {
		t.Errorf("setup --client claude in another project: exit %d\n%s", code, out)
	}
	if s := cs[0].inspect(e.getenv).servers["fly"]; !slices.Equal(s.Args, []string{"mcp", "--workspace", proj}) {
		t.Errorf("after setup in another project, Claude Desktop's fly = %+v, want it to serve %s still", s, proj)
	}

	e2 := newSetupEnv(t)
	e2.write(t, filepath.ToSlash(rel), claudeDesktopBefore)
	t.Chdir(e2.dir) // in no project
	if out, _, code := e2.run(t, "", "setup", "--client", "claude", "--no-service"); code != 0 ||
		!strings.Contains(out, "claude       skipped") || !strings.Contains(out, "run flyctl setup in a Flutter project") {
		t.Errorf("setup --client claude outside any project: exit %d\n%s", code, out)
	}
}

// TestSetupWithoutCLIs: with no client command on PATH, setup edits each
// client's file itself, and a second run finds them current. fly.io's
// flyctl first on PATH changes nothing but a note: the clients get this
// flyctl's own path, and the rival is never run.
func TestSetupWithoutCLIs(t *testing.T) {
	e := newSetupEnv(t)
	e.withRival(t)
	e.write(t, ".claude.json", claudeCodeBefore)
	e.write(t, ".codex/config.toml", codexBefore)
	e.write(t, ".gemini/settings.json", "{\n  // Gemini keeps comments\n  \"theme\": \"Dracula\"\n}\n")
	vs, err := vscodeUserDir(e.getenv)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(vs, 0o755)
	out, errs, code := e.run(t, "", "setup", "--no-service")
	if code != 0 {
		t.Fatalf("setup exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if log := fakeLog(t, e.log); log != nil {
		t.Errorf("setup ran %q with no client command on PATH", log)
	}
	if want := "note: PATH finds " + filepath.Join(e.rival, "flyctl"); !strings.Contains(out, want) {
		t.Errorf("setup with fly.io's flyctl first on PATH does not say so (%q):\n%s", want, out)
	}
	wantCodex := codexBefore + "\n[mcp_servers.fly]\ncommand = " + tomlString(e.self) + "\nargs = [\"mcp\"]\n"
	if got := e.read(t, ".codex/config.toml"); got != wantCodex {
		t.Errorf("config.toml =\n%s\nwant\n%s", got, wantCodex)
	}
	if got := e.read(t, ".gemini/settings.json"); !strings.HasPrefix(got, "{\n  // Gemini keeps comments\n  \"theme\": \"Dracula\",\n  \"mcpServers\": {\n    \"fly\": {") {
		t.Errorf("settings.json =\n%s", got)
	}
	before := e.tree(t)
	out, _, _ = e.run(t, "", "setup", "--no-service")
	if !strings.Contains(out, "Nothing to change") {
		t.Errorf("setup again:\n%s", out)
	}
	sameTree(t, "setup again", before, e.tree(t))
	out, errs, code = e.run(t, "", "uninstall", "--client", "codex", "--client", "claude-code", "--client", "gemini")
	if code != 0 {
		t.Fatalf("uninstall exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
	}
	if got := e.read(t, ".codex/config.toml"); got != codexBefore {
		t.Errorf("config.toml after uninstall =\n%s\nwant\n%s", got, codexBefore)
	}
	if got := e.read(t, ".claude.json"); got != claudeCodeBefore {
		t.Errorf(".claude.json after uninstall =\n%s\nwant\n%s", got, claudeCodeBefore)
	}
}

// TestSetupAsks: on a terminal, setup asks before sharing dart
// mcp-server, and does it on yes only.
func TestSetupAsks(t *testing.T) {
	for _, answer := range []string{"n\n", "y\n", ""} {
		e := newSetupEnv(t)
		e.fakes(t, "dart")
		e.write(t, ".cursor/mcp.json", cursorBefore)
		e.h.interactive = func() bool { return true }
		out, errs, code := e.run(t, answer, "setup", "--no-service")
		if code != 0 {
			t.Fatalf("setup exits %d; stderr:\n%s\nstdout:\n%s", code, errs, out)
		}
		if !strings.Contains(out, "Do it? [y/N]") {
			t.Errorf("setup on a terminal does not ask:\n%s", out)
		}
		shared := strings.Contains(e.read(t, "../config/upstreams.json"), "mcp-server")
		if want := answer == "y\n"; shared != want || strings.Contains(e.read(t, ".cursor/mcp.json"), `"dart"`) == want {
			t.Errorf("answer %q: shared %v, want %v:\n%s", answer, shared, want, out)
		}
	}
}

// TestSetupUsage: bad command lines are usage errors.
func TestSetupUsage(t *testing.T) {
	e := newSetupEnv(t)
	for _, args := range [][]string{
		{"setup", "extra"},
		{"setup", "--client", "emacs"},
		{"setup", "--workspace", filepath.Join(e.dir, "missing")},
		{"setup", "--workspace", e.home},
		{"doctor", "extra"},
		{"uninstall", "--client", "emacs"},
		{"uninstall", "--client", "cursor", "--purge"},
	} {
		if _, errs, code := e.run(t, "", args...); code != 2 {
			t.Errorf("flyctl %q exits %d, want 2; stderr:\n%s", args, code, errs)
		}
	}
}

// TestUninstallState: the state directory goes with --purge, or when the
// user says yes; a flyd's files are what makes it fly's.
func TestUninstallState(t *testing.T) {
	tests := []struct {
		args        []string
		interactive bool
		stdin       string
		gone        bool
	}{
		{nil, false, "", false},
		{[]string{"--purge"}, false, "", true},
		{nil, true, "y\n", true},
		{nil, true, "\n", false},
		{[]string{"--purge", "--dry-run"}, false, "", false},
	}
	for _, tt := range tests {
		e := newSetupEnv(t)
		state := filepath.Join(e.dir, "state")
		os.MkdirAll(state, 0o700)
		os.WriteFile(filepath.Join(state, "fly.db"), []byte("db"), 0o600)
		e.h.interactive = func() bool { return tt.interactive }
		out, errs, code := e.run(t, tt.stdin, append([]string{"uninstall"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("uninstall %q exits %d; stderr:\n%s\nstdout:\n%s", tt.args, code, errs, out)
		}
		_, err := os.Stat(state)
		if gone := os.IsNotExist(err); gone != tt.gone {
			t.Errorf("uninstall %q (terminal %v, answer %q): state removed %v, want %v\n%s", tt.args, tt.interactive, tt.stdin, gone, tt.gone, out)
		}
	}
	// A state directory without fly's files is not removed.
	e := newSetupEnv(t)
	state := filepath.Join(e.dir, "state")
	os.MkdirAll(state, 0o700)
	os.WriteFile(filepath.Join(state, "precious.txt"), []byte("x"), 0o600)
	out, _, _ := e.run(t, "", "uninstall", "--purge")
	if _, err := os.Stat(filepath.Join(state, "precious.txt")); err != nil || !strings.Contains(out, "left alone") {
		t.Errorf("uninstall --purge of a directory that is not fly's: %v\n%s", err, out)
	}
}
