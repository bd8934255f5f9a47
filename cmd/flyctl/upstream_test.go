package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/wine"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestUpstreamAddListRemove(t *testing.T) {
	e := flytest.NewEnv(t)
	mustFlyctl(t, e.Getenv, "upstream", "add", "dart", "--env", "A=b", "--", "dart", "mcp-server", "--force-roots-fallback")
	if _, errs, code := flyctl(t, e.Getenv, "upstream", "add", "dart", "--", "dart"); code != 1 || !strings.Contains(errs, "--force") {
		t.Fatalf("adding a name twice exited %d: %s", code, errs)
	}
	if _, errs, code := flyctl(t, e.Getenv, "upstream", "add", "two", "--prefix", "dart", "--", "x"); code != 1 || !strings.Contains(errs, "both name their tools dart_*") {
		t.Fatalf("a colliding prefix exited %d: %s", code, errs)
	}
	mustFlyctl(t, e.Getenv, "upstream", "add", "fs", "--share", "global", "--protocol", "2025-11-25", "--", "npx", "-y", "server-filesystem")
	if _, errs, code := flyctl(t, e.Getenv, "upstream", "add", "new", "--protocol", "2027-01-01", "--", "x"); code != 1 || !strings.Contains(errs, `protocol "2027-01-01"`) {
		t.Fatalf("an unknown protocol exited %d: %s", code, errs)
	}
	fi, err := os.Lstat(e.Paths.Upstreams())
	if err != nil {
		t.Fatal(err)
	}
	// Wine keeps no access list on a file: there no file is the user's alone.
	if ok, err := owner.Secret(e.Paths.Upstreams(), fi); !wine.Detected() && (err != nil || !ok) {
		t.Fatalf("upstreams.json: owner.Secret = %v, %v (mode %v); want it the user's alone", ok, err, fi.Mode())
	}
	f, err := mcpconfig.ReadFile(e.Paths.Upstreams())
	if err != nil || len(f.Servers) != 2 || f.Servers[0].Env["A"] != "b" || strings.Join(f.Servers[0].Args, " ") != "mcp-server --force-roots-fallback" || f.Servers[1].Protocol != "2025-11-25" {
		t.Fatalf("file = %+v, %v", f, err)
	}
	var list struct {
		Upstreams []struct {
			Name   string `json:"name"`
			Config struct {
				Command string `json:"command"`
				Share   string `json:"share"`
			} `json:"config"`
		} `json:"upstreams"`
	}
	if err := json.Unmarshal([]byte(mustFlyctl(t, e.Getenv, "upstream", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Upstreams) != 2 || list.Upstreams[1].Name != "fs" || list.Upstreams[1].Config.Share != "global" || list.Upstreams[0].Config.Command != "dart" {
		t.Fatalf("list --json = %+v", list)
	}
	if out := mustFlyctl(t, e.Getenv, "upstream", "list"); !strings.Contains(out, "dart mcp-server --force-roots-fallback") {
		t.Fatalf("list = %s", out)
	}
	mustFlyctl(t, e.Getenv, "upstream", "remove", "dart")
	if _, errs, code := flyctl(t, e.Getenv, "upstream", "remove", "dart"); code != 1 || !strings.Contains(errs, `no upstream named "dart"`) {
		t.Fatalf("removing twice exited %d: %s", code, errs)
	}
	if _, _, code := flyctl(t, e.Getenv, "upstream", "add", "x"); code != 2 {
		t.Fatalf("add without a command exited %d, want 2", code)
	}
}

func TestUpstreamRestartAndStatus(t *testing.T) {
	e := flytest.NewEnv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustFlyctl(t, e.Getenv, "upstream", "add", "fake", "--env", "FLY_TEST_HELPER=upstream", "--env", fakeupstream.EnvDir+"="+dir, "--", exe, "-test.run=^$")
	flytest.StartFlyd(t, e)
	ws := flutterProject(t)
	_, bin := flytest.Binaries(t)
	cmd := exec.Command(bin, "mcp", "--workspace", ws)
	cmd.Env = e.Vars
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fake_echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
		t.Fatalf("fake_echo: %v %v", res, err)
	}
	if out := mustFlyctl(t, e.Getenv, "status"); !strings.Contains(out, "UPSTREAM") || !strings.Contains(out, "fake") || !strings.Contains(out, "running") {
		t.Fatalf("status does not show the upstream:\n%s", out)
	}
	// The fake speaks the handshake era only, as dart mcp-server does.
	if out := mustFlyctl(t, e.Getenv, "upstream", "list"); !strings.Contains(out, "PROTOCOL") || !strings.Contains(out, "2025-11-25") {
		t.Fatalf("upstream list does not say what flyd speaks to it:\n%s", out)
	}
	before := fakeupstream.PIDs(dir, "instances")
	if out := mustFlyctl(t, e.Getenv, "upstream", "restart", "fake"); out != "restarted 1 process(es)\n" {
		t.Fatalf("restart = %q", out)
	}
	if _, errs, code := flyctl(t, e.Getenv, "upstream", "restart", "nope"); code != 1 || !strings.Contains(errs, `no upstream named "nope"`) {
		t.Fatalf("restart of an unknown upstream exited %d: %s", code, errs)
	}
	flytest.Eventually(t, "a new upstream process after restart", func() bool {
		return len(fakeupstream.PIDs(dir, "instances")) > len(before)
	})
}

func TestConfigImport(t *testing.T) {
	e := flytest.NewEnv(t)
	dir := t.TempDir()
	editor := `{
  "mcpServers": {
    "dart": {"type": "stdio", "command": "dart", "args": ["mcp-server"], "env": {"K": "v"}},
    "remote": {"type": "http", "url": "https://example.com/mcp"},
    "notes": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]}
  },
  "other": {"kept": 1.50}
}
`
	mcpJSON := dir + "/.mcp.json"
	if err := os.WriteFile(mcpJSON, []byte(editor), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := flyctl(t, e.Getenv, "config", "mcp", "--client", "claude-code", "--workspace", dir, "--import")
	if code != 0 || !strings.Contains(out, "move dart (dart mcp-server)") || !strings.Contains(out, "move notes") || !strings.Contains(out, "keep remote") || !strings.Contains(errs, "--write") {
		t.Fatalf("plan exited %d:\n%s\n%s", code, out, errs)
	}
	if b, _ := os.ReadFile(mcpJSON); string(b) != editor {
		t.Fatal("the plan changed the editor's file")
	}
	if _, err := os.Stat(e.Paths.Upstreams()); err == nil {
		t.Fatal("the plan wrote upstreams.json")
	}

	mustFlyctl(t, e.Getenv, "config", "mcp", "--client", "claude-code", "--workspace", dir, "--import", "--write")
	f, err := mcpconfig.ReadFile(e.Paths.Upstreams())
	if err != nil || len(f.Servers) != 2 || f.Servers[0].Name != "dart" || f.Servers[0].Env["K"] != "v" || f.Servers[0].Type != "" || f.Servers[1].Name != "notes" {
		t.Fatalf("upstreams.json = %+v, %v", f, err)
	}
	var after struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Other      json.RawMessage            `json:"other"`
	}
	b, _ := os.ReadFile(mcpJSON)
	if err := json.Unmarshal(b, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.MCPServers) != 2 || after.MCPServers["remote"] == nil || after.MCPServers["fly"] == nil || !strings.Contains(string(after.Other), "1.50") {
		t.Fatalf("editor file after import:\n%s", b)
	}
	backups, _ := filepath.Glob(mcpJSON + ".fly-backup-*")
	if len(backups) != 1 {
		t.Fatalf("backups: %v", backups)
	}
	if b, _ := os.ReadFile(backups[0]); string(b) != editor {
		t.Fatal("the backup is not the original")
	}
	// Again: nothing left to move, and no conflict with what is there.
	if out := mustFlyctl(t, e.Getenv, "config", "mcp", "--client", "claude-code", "--workspace", dir, "--import"); !strings.Contains(out, "no stdio servers to move") {
		t.Fatalf("second plan:\n%s", out)
	}
}

func TestConfigMCPHTTP(t *testing.T) {
	e := flytest.NewEnv(t)
	dir := t.TempDir()
	out := mustFlyctl(t, e.Getenv, "config", "mcp", "--client", "vscode", "--http", "--workspace", dir)
	var doc struct {
		Servers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	fly := doc.Servers["fly"]
	if fly.Type != "http" || !strings.HasPrefix(fly.URL, "http://127.0.0.1:7717/mcp?workspace=") || fly.Headers["Authorization"] != "Bearer ${env:FLY_TOKEN}" {
		t.Fatalf("vscode --http = %+v", fly)
	}
	mustFlyctl(t, e.Getenv, "config", "mcp", "--client", "claude-code", "--http", "--workspace", dir, "--write")
	b, err := os.ReadFile(filepath.Join(dir, ".mcp.json"))
	if err != nil || !strings.Contains(string(b), `"Bearer ${FLY_TOKEN}"`) || !strings.Contains(string(b), `"type": "http"`) {
		t.Fatalf(".mcp.json = %s, %v", b, err)
	}
	if _, errs, code := flyctl(t, e.Getenv, "config", "mcp", "--client", "claude", "--http"); code != 2 || !strings.Contains(errs, "connectors") {
		t.Fatalf("claude --http exited %d: %s", code, errs)
	}
}

func TestTokenAndDashboard(t *testing.T) {
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	tok := strings.TrimSpace(mustFlyctl(t, e.Getenv, "token", "print"))
	url := strings.TrimSpace(mustFlyctl(t, e.Getenv, "dashboard"))
	if len(tok) != 64 || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/#token="+tok) {
		t.Fatalf("token %q, dashboard %q", tok, url)
	}
	rotated := strings.TrimSpace(mustFlyctl(t, e.Getenv, "token", "rotate"))
	if rotated == tok || strings.TrimSpace(mustFlyctl(t, e.Getenv, "token", "print")) != rotated {
		t.Fatalf("rotate gave %q (was %q)", rotated, tok)
	}
}

// TestConfigMCPHTTPRefusesFallbackPort: a flyd whose configured port was
// taken listens elsewhere for now; a config naming that other port would
// send the token to whoever holds it later, so none is written.
func TestConfigMCPHTTPRefusesFallbackPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e, "--listen", taken.Addr().String())
	dir := t.TempDir()
	out, errs, code := flyctl(t, e.Getenv, "config", "mcp", "--client", "cursor", "--http", "--workspace", dir, "--write")
	if code != 1 || !strings.Contains(errs, "was taken") || !strings.Contains(errs, taken.Addr().String()) || out != "" {
		t.Fatalf("config mcp --http with flyd on a fallback port: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cursor", "mcp.json")); err == nil {
		t.Fatal("a config was written naming the fallback port")
	}

	// flyd on its own port: the config names it.
	e2 := flytest.NewEnv(t)
	flytest.StartFlyd(t, e2)
	st, err := flytest.Status(e2)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustFlyctl(t, e2.Getenv, "config", "mcp", "--client", "cursor", "--http", "--workspace", dir); !strings.Contains(out, "http://"+st.HTTP+"/mcp") {
		t.Fatalf("config names %s, want flyd's %s", out, st.HTTP)
	}
}
