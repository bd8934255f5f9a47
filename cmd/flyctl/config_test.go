package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/wine"
)

// jsonText is s as a JSON string holds it, without the quotes.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// configEnv is a getenv for config mcp: a fixed PATH and Flutter
// environment under home.
func configEnv(home string) func(string) string {
	env := map[string]string{
		"HOME":         home,
		"PATH":         "/home/dev/flutter/bin:/usr/local/bin:/usr/bin:/bin",
		"FLUTTER_ROOT": "/home/dev/flutter",
		"EDITOR":       "vi", // not an environment flutter needs
	}
	return func(k string) string { return env[k] }
}

func TestConfigMCPPrint(t *testing.T) {
	ws := t.TempDir()
	getenv := configEnv(t.TempDir())
	for _, client := range []string{"claude", "claude-code", "cursor", "vscode"} {
		t.Run(client, func(t *testing.T) {
			args := []string{"config", "mcp", "--client", client, "--workspace", ws}
			if client == "claude" {
				args = append(args, "--flyctl", "/usr/local/bin/flyctl")
			}
			out, errs, code := flyctl(t, getenv, args...)
			if code != 0 {
				t.Fatalf("flyctl %q: exit %d, stderr %s", args, code, errs)
			}
			// Paths as JSON writes them (a Windows path's backslashes
			// are escaped), and --flyctl made absolute (on Windows, on
			// the current drive).
			abs, _ := filepath.Abs("/usr/local/bin/flyctl")
			out = strings.NewReplacer(jsonText(ws), "<WORKSPACE>", jsonText(abs), "/usr/local/bin/flyctl").Replace(out)
			checkGolden(t, "cli/config_mcp_"+client+".golden", out)
			if !strings.Contains(errs, "--write") {
				t.Errorf("stderr = %q, want a pointer to --write", errs)
			}
			var doc map[string]map[string]serverEntry
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("the snippet is not JSON: %v", err)
			}
		})
	}
	// claude's default command is this flyctl, absolute.
	out := mustFlyctl(t, getenv, "config", "mcp", "--client", "claude", "--workspace", ws)
	var doc struct {
		MCPServers map[string]serverEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !filepath.IsAbs(doc.MCPServers["fly"].Command) {
		t.Errorf("claude's command = %q (%v), want an absolute path", doc.MCPServers["fly"].Command, err)
	}
}

func TestConfigMCPWrite(t *testing.T) {
	ws := t.TempDir()
	getenv := configEnv(t.TempDir())
	name := filepath.Join(ws, ".vscode", "mcp.json")
	os.MkdirAll(filepath.Dir(name), 0o755)
	existing := `{
  "inputs": [{"type": "promptString", "id": "token", "password": true}],
  "servers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"x-n": 12345678901234567890}},
    "fly": {"command": "old-flyctl", "args": []}
  },
  "zzz": {"b": 1, "a": [true, null, "<&>"]}
}`
	if err := os.WriteFile(name, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errs, code := flyctl(t, getenv, "config", "mcp", "--client", "vscode", "--workspace", ws, "--write")
	if code != 0 || !strings.Contains(errs, name) {
		t.Fatalf("--write: exit %d, stderr %q; want 0 and the file named", code, errs)
	}
	got, _ := os.ReadFile(name)
	want := `{
  "inputs": [
    {
      "type": "promptString",
      "id": "token",
      "password": true
    }
  ],
  "servers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": {
        "x-n": 12345678901234567890
      }
    },
    "fly": {
      "type": "stdio",
      "command": "flyctl",
      "args": [
        "mcp",
        "--workspace",
        "${workspaceFolder}"
      ]
    }
  },
  "zzz": {
    "b": 1,
    "a": [
      true,
      null,
      "<&>"
    ]
  }
}
`
	if string(got) != want {
		t.Errorf("merged file =\n%s\nwant\n%s", got, want)
	}
	var before, after map[string]any
	json.Unmarshal([]byte(existing), &before)
	json.Unmarshal(got, &after)
	if !reflect.DeepEqual(before["servers"].(map[string]any)["github"], after["servers"].(map[string]any)["github"]) ||
		!reflect.DeepEqual(before["inputs"], after["inputs"]) || !reflect.DeepEqual(before["zzz"], after["zzz"]) {
		t.Errorf("the merge changed what it does not own:\nbefore %v\nafter  %v", before, after)
	}
	if fi, _ := os.Stat(name); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 { // Windows has no mode bits
		t.Errorf("mode after the merge = %v, want the file's 0600 kept", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(name))
	if len(entries) != 1 {
		t.Errorf("the merge left files behind: %v", entries)
	}

	// Again: nothing to do, nothing written.
	_, errs, code = flyctl(t, getenv, "config", "mcp", "--client", "vscode", "--workspace", ws, "--write")
	if again, _ := os.ReadFile(name); code != 0 || !bytes.Equal(again, got) || !strings.Contains(errs, "nothing to do") {
		t.Errorf("second --write: exit %d, stderr %q, file changed %v; want 0, nothing to do", code, errs, !bytes.Equal(again, got))
	}
}

func TestConfigMCPWriteNew(t *testing.T) {
	ws := t.TempDir()
	getenv := configEnv(t.TempDir())
	for _, tc := range []struct {
		client, file string
	}{
		{"cursor", ".cursor/mcp.json"},
		{"claude-code", ".mcp.json"},
		{"vscode", ".vscode/mcp.json"},
	} {
		mustFlyctl(t, getenv, "config", "mcp", "--client", tc.client, "--workspace", ws, "--write")
		got, err := os.ReadFile(filepath.Join(ws, tc.file))
		if err != nil {
			t.Fatalf("%s --write: %v", tc.client, err)
		}
		printed := mustFlyctl(t, getenv, "config", "mcp", "--client", tc.client, "--workspace", ws)
		if string(got) != printed {
			t.Errorf("%s: the written file =\n%s\nwant what is printed:\n%s", tc.client, got, printed)
		}
	}
	// An empty file, as editors create, is an empty config.
	name := filepath.Join(ws, ".cursor", "mcp.json")
	os.WriteFile(name, []byte("\n"), 0o644)
	mustFlyctl(t, getenv, "config", "mcp", "--client", "cursor", "--workspace", ws, "--write")
	if got, _ := os.ReadFile(name); !strings.Contains(string(got), `"fly"`) {
		t.Errorf("--write into an empty file gave %q", got)
	}
}

func TestConfigMCPWriteClaude(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	appData := filepath.Join(home, "AppData", "Roaming")
	getenv := func(k string) string {
		if k == "APPDATA" {
			return appData
		}
		return configEnv(home)(k)
	}
	name := filepath.Join(home, ".config", "Claude", "claude_desktop_config.json")
	switch runtime.GOOS {
	case "darwin":
		name = filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json")
	case "windows":
		name = filepath.Join(appData, "Claude", "claude_desktop_config.json")
	}
	self := filepath.Join(home, "fly", "flyctl"+exeSuffix) // absolute on every OS
	os.MkdirAll(filepath.Dir(name), 0o755)
	os.WriteFile(name, []byte(`{"globalShortcut": "Ctrl+Space", "mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}}}`), 0o644)
	mustFlyctl(t, getenv, "config", "mcp", "--client", "claude", "--workspace", ws, "--flyctl", self, "--write")
	var doc struct {
		Shortcut string                    `json:"globalShortcut"`
		Servers  map[string]map[string]any `json:"mcpServers"`
	}
	b, _ := os.ReadFile(name)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	fly := doc.Servers["fly"]
	if doc.Shortcut != "Ctrl+Space" || doc.Servers["files"]["command"] != "npx" || fly["command"] != self ||
		!reflect.DeepEqual(fly["args"], []any{"mcp", "--workspace", ws}) ||
		!reflect.DeepEqual(fly["env"], map[string]any{"PATH": getenv("PATH"), "FLUTTER_ROOT": "/home/dev/flutter"}) {
		t.Errorf("Claude Desktop config after --write:\n%s", b)
	}
}

func TestConfigMCPWriteRefuses(t *testing.T) {
	getenv := configEnv(t.TempDir())
	for _, content := range []string{
		`{"servers": {"a": 1},}`,               // trailing comma
		"// my servers\n{\"servers\": {}}",     // comments (JSONC)
		`["servers"]`,                          // not an object
		`{"servers": ["fly"]}`,                 // servers not an object
		`{"servers": {}} {"servers": {}}`,      // two documents
		`{"servers": {"github": {"url": "x"}}`, // cut short
	} {
		ws := t.TempDir()
		name := filepath.Join(ws, ".vscode", "mcp.json")
		os.MkdirAll(filepath.Dir(name), 0o755)
		os.WriteFile(name, []byte(content), 0o644)
		out, errs, code := flyctl(t, getenv, "config", "mcp", "--client", "vscode", "--workspace", ws, "--write")
		got, _ := os.ReadFile(name)
		if code != 1 || out != "" || string(got) != content || !strings.Contains(errs, "is not valid JSON") || !strings.Contains(errs, "does not overwrite") {
			t.Errorf("--write into %q: exit %d, stderr %q, file now %q; want 1, the file untouched, a clear error", content, code, errs, got)
		}
	}
}

func TestConfigMCPWriteSymlink(t *testing.T) {
	wine.SkipUnder(t, "Wine 8's CreateSymbolicLink succeeds and makes no link")
	ws := t.TempDir()
	dotfiles := t.TempDir()
	target := filepath.Join(dotfiles, "mcp.json")
	os.WriteFile(target, []byte(`{"mcpServers": {"other": {"command": "x"}}}`), 0o644)
	os.MkdirAll(filepath.Join(ws, ".cursor"), 0o755)
	link := filepath.Join(ws, ".cursor", "mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	mustFlyctl(t, configEnv(t.TempDir()), "config", "mcp", "--client", "cursor", "--workspace", ws, "--write")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced by a file (%v)", err)
	}
	b, _ := os.ReadFile(target)
	if !strings.Contains(string(b), `"other"`) || !strings.Contains(string(b), `"fly"`) {
		t.Errorf("the link's target =\n%s\nwant both servers", b)
	}
}

// TestConfigMCPTools: --tools and --disable reach the editor's config,
// as flyctl mcp flags; a malformed term is refused before anything is
// written.
func TestConfigMCPTools(t *testing.T) {
	ws := t.TempDir()
	getenv := configEnv(t.TempDir())
	out := mustFlyctl(t, getenv, "config", "mcp", "--client", "cursor", "--workspace", ws, "--tools", "app,files", "--disable", "dart_pub*")
	var doc struct {
		MCPServers map[string]serverEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{"mcp", "--workspace", "${workspaceFolder}", "--tools", "app,files", "--disable", "dart_pub*"}
	if got := doc.MCPServers["fly"].Args; !reflect.DeepEqual(got, want) {
		t.Errorf("args = %q, want %q", got, want)
	}
	if _, errs, code := flyctl(t, getenv, "config", "mcp", "--client", "cursor", "--workspace", ws, "--tools", "a/b"); code != 2 || !strings.Contains(errs, "a/b") {
		t.Errorf("--tools a/b: exit %d, %s", code, errs)
	}
}
