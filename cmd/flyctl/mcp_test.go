package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/wire"
)

// mcpTempDir returns a temp dir short enough for a socket path.
func mcpTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// mcpEnv is a getenv for run: fly's paths under dir, and nothing else
// unless given.
func mcpEnv(dir string, extra ...string) func(string) string {
	env := map[string]string{
		"FLY_SOCKET":    filepath.Join(dir, "flyd.sock"),
		"FLY_STATE_DIR": filepath.Join(dir, "state"),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return func(k string) string { return env[k] }
}

func TestMCPHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp", "--help"}, mcpEnv(t.TempDir()), strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("flyctl mcp --help = %v, want nil", err)
	}
	out := stdout.String()
	for _, want := range []string{"Usage:\n  flyctl mcp", "--workspace", "--start-timeout", "--flyd PATH", "Examples:\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("flyctl mcp --help does not mention %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(out), "--start-timeout 30s") {
		t.Errorf("flyctl mcp --help does not end with examples:\n%s", out)
	}
}

func TestMCPUsageErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"--workspace", filepath.Join(dir, "missing")}, "does not exist"},
		{[]string{"--workspace", file}, "is not a directory"},
		{[]string{"--start-timeout", "0s"}, "must be positive"},
		{[]string{"--start-timeout", "soon"}, "--start-timeout"},
		{[]string{"--flyd", file}, "is not executable"},
		{[]string{"--flyd", filepath.Join(dir, "missing")}, "no such file"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append([]string{"mcp"}, tt.args...)
		err := run(context.Background(), args, mcpEnv(dir), strings.NewReader(""), &stdout, &stderr)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("flyctl %q = %v, want a usage error containing %q", args, err, tt.want)
		}
		if code := exitCode(err, &stderr); code != 2 {
			t.Errorf("flyctl %q exits %d, want 2", args, code)
		}
		if stdout.Len() > 0 {
			t.Errorf("flyctl %q wrote %q to stdout, want nothing", args, stdout.String())
		}
	}
}

func TestMCPNoFlyd(t *testing.T) {
	dir := mcpTempDir(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp", "--workspace", dir}, mcpEnv(dir, "PATH", ""),
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`+"\n"), &stdout, &stderr)
	for _, want := range []string{"flyd is not running", filepath.Join(dir, "flyd.sock"), "no flyd binary", "--flyd PATH", "flyd run"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("flyctl mcp without flyd = %v, want an error containing %q", err, want)
		}
	}
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("flyctl mcp without flyd exits %d, want 1", code)
	}
	if stdout.Len() > 0 {
		t.Errorf("flyctl mcp wrote %q to stdout, want nothing", stdout.String())
	}
}

// TestMCPRelay runs flyctl mcp in-process against a minimal flyd: one
// request, one reply, the resolved workspace and environment in headers.
func TestMCPRelay(t *testing.T) {
	dir := mcpTempDir(t)
	ws := filepath.Join(dir, "my app")
	os.Mkdir(ws, 0o755)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	wantWS, _ := filepath.EvalSymlinks(ws)

	getenv := mcpEnv(dir, "PATH", "/usr/bin", "FLUTTER_ROOT", "/opt/flutter")
	ln, err := net.Listen("unix", getenv("FLY_SOCKET"))
	if err != nil {
		t.Fatal(err)
	}
	headers := make(chan http.Header, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wire.Subprotocol}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		if _, _, err := c.Read(r.Context()); err != nil {
			return
		}
		c.Write(r.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		c.Read(r.Context()) // until the shim closes
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"mcp", "--workspace", link}, getenv,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`+"\n"), &stdout, &stderr)
	if err != nil {
		t.Fatalf("flyctl mcp = %v, want nil; stderr:\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	h := <-headers
	if got, _ := url.QueryUnescape(h.Get(wire.HeaderWorkspace)); got != wantWS {
		t.Errorf("workspace sent = %q, want %q (absolute, symlinks resolved)", got, wantWS)
	}
	if env := wire.DecodeEnv(h.Get(wire.HeaderEnv)); env["FLUTTER_ROOT"] != "/opt/flutter" || env["PATH"] != "/usr/bin" {
		t.Errorf("env sent = %v, want PATH and FLUTTER_ROOT from getenv", env)
	}
}
