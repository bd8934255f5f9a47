package main

import (
	"slices"
	"testing"
)

func TestCodexConfigRead(t *testing.T) {
	in := `# settings
model = "o3" # a comment with [brackets]
notes = """
[mcp_servers.fake]
command = "not a table"
"""
when = 1979-05-27 07:32:00Z

[mcp_servers.dart]
command = 'dart'
args = [
  "mcp-server", # stable since 3.9
  "--force-roots-fallback",
]

[mcp_servers.dart.env]
PUB_CACHE = "/tmp/pub"

[mcp_servers."with space"]
command = "C:\\tools\\x.exe"
args = ["\u00e9", 'lit\eral']

[mcp_servers]
inline = { command = "npx", args = ["-y", "srv"] }

[profiles.fast]
model = "gpt"
`
	c, err := parseCodexConfig([]byte(in))
	if err != nil {
		t.Fatalf("parseCodexConfig = %v", err)
	}
	var names []string
	for _, s := range c.servers {
		names = append(names, s.name)
	}
	if want := []string{"dart", "with space", "inline"}; !slices.Equal(names, want) {
		t.Fatalf("servers = %q, want %q", names, want)
	}
	dart := c.server("dart")
	if dart.command != "dart" || !slices.Equal(dart.args, []string{"mcp-server", "--force-roots-fallback"}) || dart.inline || len(dart.regions) != 2 {
		t.Errorf("dart = %+v", dart)
	}
	if got := in[dart.regions[1][0]:dart.regions[1][1]]; got != "[mcp_servers.dart.env]\nPUB_CACHE = \"/tmp/pub\"\n" {
		t.Errorf("dart's env table = %q", got)
	}
	if s := c.server("with space"); s.command != `C:\tools\x.exe` || !slices.Equal(s.args, []string{"é", `lit\eral`}) {
		t.Errorf("with space = %+v", s)
	}
	if s := c.server("inline"); !s.inline || s.command != "npx" {
		t.Errorf("inline = %+v", s)
	}
}

func TestCodexConfigEdit(t *testing.T) {
	const before = "model = \"o3\"\n\n[mcp_servers.dart]\ncommand = \"dart\"\nargs = [\"mcp-server\"]\n\n# profiles\n[profiles.x]\nmodel = \"gpt\"\n"
	c, err := parseCodexConfig([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	added, err := c.setServer("fly", `/opt/my "fly"/flyctl`, []string{"mcp"})
	if err != nil {
		t.Fatal(err)
	}
	want := before + "\n[mcp_servers.fly]\ncommand = \"/opt/my \\\"fly\\\"/flyctl\"\nargs = [\"mcp\"]\n"
	if string(added) != want {
		t.Errorf("setServer =\n%s\nwant\n%s", added, want)
	}
	c2, err := parseCodexConfig(added)
	if err != nil {
		t.Fatalf("the result does not parse: %v", err)
	}
	if s := c2.server("fly"); s.command != `/opt/my "fly"/flyctl` || !slices.Equal(s.args, []string{"mcp"}) {
		t.Errorf("fly reads back as %+v", s)
	}
	// Replacing keeps its place; removing gives the file back.
	replaced, err := c2.setServer("fly", "/new/flyctl", []string{"mcp", "--tools", "app"})
	if err != nil {
		t.Fatal(err)
	}
	if want := before + "\n[mcp_servers.fly]\ncommand = \"/new/flyctl\"\nargs = [\"mcp\", \"--tools\", \"app\"]\n"; string(replaced) != want {
		t.Errorf("replaced =\n%s\nwant\n%s", replaced, want)
	}
	c3, _ := parseCodexConfig(replaced)
	removed, found, err := c3.removeServer("fly")
	if err != nil || !found || string(removed) != before {
		t.Errorf("removeServer = %q, %v, %v; want the file as it was", removed, found, err)
	}
	// A server between others, with a subtable: its tables go, the
	// comment before the next table stays.
	c4, _ := parseCodexConfig([]byte(before))
	cut, found, _ := c4.removeServer("dart")
	if want := "model = \"o3\"\n\n# profiles\n[profiles.x]\nmodel = \"gpt\"\n"; !found || string(cut) != want {
		t.Errorf("removeServer(dart) =\n%q\nwant\n%q", cut, want)
	}
	// Into an empty file, and a file without a final newline.
	empty, _ := parseCodexConfig(nil)
	if got, _ := empty.setServer("fly", "/f", []string{"mcp"}); string(got) != "[mcp_servers.fly]\ncommand = \"/f\"\nargs = [\"mcp\"]\n" {
		t.Errorf("setServer into an empty file = %q", got)
	}
	bare, _ := parseCodexConfig([]byte("model = \"o3\""))
	if got, _ := bare.setServer("fly", "/f", []string{"mcp"}); string(got) != "model = \"o3\"\n\n[mcp_servers.fly]\ncommand = \"/f\"\nargs = [\"mcp\"]\n" {
		t.Errorf("setServer after a last line without newline = %q", got)
	}
	// An inline definition is not edited.
	inline, _ := parseCodexConfig([]byte("mcp_servers.fly = { command = \"x\" }\n"))
	if _, err := inline.setServer("fly", "/f", nil); err == nil {
		t.Errorf("setServer over an inline table = nil error")
	}
	if _, _, err := inline.removeServer("fly"); err == nil {
		t.Errorf("removeServer of an inline table = nil error")
	}
}

func TestCodexConfigRefuses(t *testing.T) {
	for _, in := range []string{
		"a = \"unterminated\n",
		"[mcp_servers.x\ncommand = \"y\"\n",
		"a = [1, 2\n",
		"a = \"x\" b\n",
		"a = \"\\q\"\n",
		"= 1\n",
		"a = '''never ends\n",
	} {
		if _, err := parseCodexConfig([]byte(in)); err == nil {
			t.Errorf("parseCodexConfig(%q) = nil error, want a refusal", in)
		}
	}
}

// FuzzCodexConfig: whatever config.toml holds, scanning never panics, and
// setting then removing fly leaves a file that scans again, without fly.
func FuzzCodexConfig(f *testing.F) {
	f.Add([]byte("model = \"o3\"\n[mcp_servers.dart]\ncommand = \"dart\"\nargs = [\"mcp-server\"]\n"))
	f.Add([]byte("[mcp_servers.fly]\ncommand = 'x'\n[mcp_servers.fly.env]\nA = \"\"\"\nb\"\"\"\n"))
	f.Add([]byte("a = { b = [1, {c = 2}] }\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCodexConfig(b)
		if err != nil {
			return
		}
		out, err := c.setServer("fly", "/f", []string{"mcp"})
		if err != nil {
			return
		}
		c2, err := parseCodexConfig(out)
		if err != nil {
			t.Fatalf("setServer made a file that does not scan: %v\n%q\n%q", err, b, out)
		}
		if s := c2.server("fly"); s == nil || s.command != "/f" {
			t.Fatalf("setServer made a file without fly:\n%q", out)
		}
		out2, _, err := c2.removeServer("fly")
		if err != nil {
			t.Fatalf("removeServer = %v", err)
		}
		c3, err := parseCodexConfig(out2)
		if err != nil {
			t.Fatalf("removeServer made a file that does not scan: %v\n%q", err, out2)
		}
		if c3.server("fly") != nil && len(c3.server("fly").regions) > 0 {
			t.Fatalf("removeServer left fly:\n%q", out2)
		}
	})
}
