package mcpconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func names(ss []Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestParseKeepsOrderAndOtherKeys(t *testing.T) {
	in := `{"theme":"dark","mcpServers":{"zeta":{"command":"z","args":["1"],"alwaysAllow":["x"]},"alpha":{"command":"a","env":{"K":"v"},"share":"global"}},"projects":{"/p":{}}}`
	f, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(f.Servers), ","); got != "zeta,alpha" {
		t.Fatalf("order = %s, want zeta,alpha", got)
	}
	if string(f.Servers[0].Extra["alwaysAllow"]) != `["x"]` {
		t.Fatalf("unknown field lost: %v", f.Servers[0].Extra)
	}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(b)
	if err != nil {
		t.Fatalf("reparse %s: %v", b, err)
	}
	if got := strings.Join(names(g.Servers), ","); got != "zeta,alpha" {
		t.Fatalf("order after rewrite = %s\n%s", got, b)
	}
	if string(g.Other["theme"]) != `"dark"` || g.Other["projects"] == nil {
		t.Fatalf("other keys lost:\n%s", b)
	}
	if !g.Servers[0].Equal(f.Servers[0]) || g.Servers[1].SharedAs() != ShareGlobal || g.Servers[1].Env["K"] != "v" {
		t.Fatalf("entries changed:\n%s", b)
	}
}

func TestUpstreamsRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"same prefix", `{"mcpServers":{"a":{"command":"x","prefix":"p"},"b":{"command":"y","prefix":"p"}}}`, "servers a and b both name their tools p_*"},
		{"prefix is another's name", `{"mcpServers":{"dart":{"command":"x"},"d2":{"command":"y","prefix":"Dart"}}}`, "servers dart and d2"},
		{"bad share", `{"mcpServers":{"a":{"command":"x","share":"team"}}}`, `share "team"`},
		{"url server", `{"mcpServers":{"a":{"type":"http","url":"http://x"}}}`, "stdio servers only"},
		{"no command", `{"mcpServers":{"a":{}}}`, "stdio servers only"},
		{"bad name", `{"mcpServers":{"a.b":{"command":"x"}}}`, `server name "a.b"`},
		{"bad env", `{"mcpServers":{"a":{"command":"x","env":{"A=B":"c"}}}}`, `"A=B"`},
		{"twice", `{"mcpServers":{"a":{"command":"x"},"a":{"command":"y"}}}`, `names "a" twice`},
		{"not object", `{"mcpServers":[]}`, "not an object"},
		{"two unprefixed", `{"mcpServers":{"a":{"command":"x","prefix":""},"b":{"command":"y","prefix":""}}}`, "at most one server's names go unprefixed"},
		{"bad prefix", `{"mcpServers":{"a":{"command":"x","prefix":"a b"}}}`, `prefix "a b"`},
		{"unknown protocol", `{"mcpServers":{"a":{"command":"x","protocol":"2026-01-01"}}}`, `protocol "2026-01-01": use one of 2024-11-05`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.in))
			if err == nil {
				_, err = Upstreams(f)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestUpstreamsSkipsDisabled(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers":{"a":{"command":"x","disabled":true},"b":{"command":"y"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := Upstreams(f)
	if err != nil || len(ss) != 1 || ss[0].Name != "b" || ss[0].Timeout() != DefaultTimeout || ss[0].ToolPrefix() != "b" {
		t.Fatalf("Upstreams = %+v, %v", ss, err)
	}
}

// TestEmptyPrefix: "prefix": "" is kept apart from no prefix at all, and
// survives a rewrite of the file.
func TestEmptyPrefix(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers":{"fixture":{"command":"x","prefix":""},"dart":{"command":"y"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := Upstreams(f)
	if err != nil || len(ss) != 2 || ss[0].ToolPrefix() != "" || ss[1].ToolPrefix() != "dart" {
		t.Fatalf("Upstreams = %+v, %v", ss, err)
	}
	p := filepath.Join(t.TempDir(), "upstreams.json")
	if err := WriteFile(p, f, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), `"prefix": ""`) {
		t.Fatalf("rewritten file lost the empty prefix:\n%s", b)
	}
}

func TestReadWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "upstreams.json")
	f, err := ReadFile(p)
	if err != nil || len(f.Servers) != 0 {
		t.Fatalf("missing file = %+v, %v; want empty", f, err)
	}
	f.Put(Server{Name: "dart", Command: "dart", Args: []string{"mcp-server"}})
	f.Put(Server{Name: "fs", Command: "npx"})
	f.Put(Server{Name: "dart", Command: "dart", Args: []string{"mcp-server", "--x"}})
	if err := WriteFile(p, f, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(g.Servers), ","); got != "dart,fs" || len(g.Servers[0].Args) != 2 {
		t.Fatalf("after write: %+v", g.Servers)
	}
	if !g.Remove("dart") || g.Remove("dart") {
		t.Fatal("Remove reported wrongly")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"dart":{"command":"dart","args":["mcp-server"],"env":{},"share":"workspace"}}}`))
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","prefix":"p"},"b":{"command":"y","extra":[1,{"z":null}]}},"k":1}`))
	f.Add([]byte(`{"mcpServers":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		_, _ = Upstreams(cfg)
		b, err := cfg.Marshal()
		if err != nil {
			return // an Other value that is not valid JSON cannot come from Parse
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Marshal wrote what Parse refuses: %v\n%s", err, b)
		}
		if len(again.Servers) != len(cfg.Servers) {
			t.Fatalf("%d servers became %d", len(cfg.Servers), len(again.Servers))
		}
	})
}

// FuzzValidName checks the hand-written name checks against the rules
// written as regular expressions.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "dart", "a-b_c9", "_x", "9x", "x y", "é", strings.Repeat("a", 33)} {
		f.Add(s)
	}
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	envKeyRE := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	f.Fuzz(func(t *testing.T, s string) {
		if validName(s) != nameRE.MatchString(s) {
			t.Fatalf("validName(%q) = %v", s, validName(s))
		}
		if validEnvKey(s) != envKeyRE.MatchString(s) {
			t.Fatalf("validEnvKey(%q) = %v", s, validEnvKey(s))
		}
	})
}
