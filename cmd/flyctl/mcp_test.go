package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wine"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/shim"
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
		{[]string{"--reconnect-timeout", "-1s"}, "must not be negative"},
		{[]string{"--flyd", file}, "is not executable"},
		{[]string{"--flyd", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--log-level", "loud"}, `--log-level: "loud" is not debug, info, warn or error`},
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
	endpoint, perr := paths.Resolve(mcpEnv(dir)) // on Windows, the pipe FLY_SOCKET names
	if perr != nil {
		t.Fatal(perr)
	}
	wants := []string{"flyd is not running", endpoint.Socket, "no flyd binary", "--flyd PATH", "flyd run"}
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("flyctl mcp without flyd = %v, want an error containing %q", err, want)
		}
	}
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("flyctl mcp without flyd exits %d, want 1", code)
	}
	// The client learns the same from the reply to its initialize.
	var reply struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &reply); err != nil || reply.ID != 1 {
		t.Fatalf("stdout = %q, want one error reply to id 1 (%v)", stdout.String(), err)
	}
	for _, want := range wants {
		if !strings.Contains(reply.Error.Message, want) {
			t.Errorf("error reply %q does not contain %q", reply.Error.Message, want)
		}
	}
}

// fakeServiceManager installs an executable name in a new directory that
// records its arguments in a file and exits with code; it returns the
// directory and the file.
func fakeServiceManager(t *testing.T, name string, code int) (dir, calls string) {
	t.Helper()
	dir = t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >> %q\necho 'Failed to connect to bus' >&2\nexit %d\n", calls, code)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, calls
}

func TestStartService(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the service manager below is systemd's")
	}
	home := t.TempDir()
	unit := filepath.Join(home, ".config", "systemd", "user", "flyd.service")
	xdg := t.TempDir()
	xdgUnit := filepath.Join(xdg, "systemd", "user", "flyd.service")
	for _, tt := range []struct {
		name      string
		units     []string
		env       []string
		code      int
		wantCalls string
		wantErr   string // "" for success; ErrNoService is checked by name
	}{
		{"no unit", nil, nil, 0, "", "no flyd service is installed"},
		{"unit", []string{unit}, nil, 0, "--user start flyd.service\n", ""},
		// flyctl service install (kardianos) writes ~/.config, whatever
		// XDG_CONFIG_HOME says, so that is where the shim looks.
		{"XDG_CONFIG_HOME is not where units go", []string{unit}, []string{"XDG_CONFIG_HOME", xdg}, 0, "--user start flyd.service\n", ""},
		{"unit only under XDG_CONFIG_HOME", []string{xdgUnit}, []string{"XDG_CONFIG_HOME", xdg}, 0, "", "no flyd service is installed"},
		{"systemctl fails", []string{unit}, nil, 1, "--user start flyd.service\n", "systemctl --user start flyd.service: exit status 1: Failed to connect to bus"},
		{"paths overridden", []string{unit}, []string{"FLY_SOCKET", "/tmp/x.sock"}, 0, "", "no flyd service is installed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(home, ".config"))
			os.RemoveAll(filepath.Join(xdg, "systemd"))
			for _, u := range tt.units {
				os.MkdirAll(filepath.Dir(u), 0o755)
				os.WriteFile(u, []byte("[Unit]\n"), 0o644)
			}
			bin, calls := fakeServiceManager(t, "systemctl", tt.code)
			vars := map[string]string{"HOME": home, "PATH": "relative:" + bin}
			for i := 0; i+1 < len(tt.env); i += 2 {
				vars[tt.env[i]] = tt.env[i+1]
			}
			err := startService(context.Background(), func(k string) string { return vars[k] })
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("startService = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("startService = %v, want an error containing %q", err, tt.wantErr)
			case strings.HasPrefix(tt.wantErr, "no flyd service") && !errors.Is(err, shim.ErrNoService):
				t.Errorf("startService = %v, want shim.ErrNoService", err)
			}
			got, _ := os.ReadFile(calls)
			if string(got) != tt.wantCalls {
				t.Errorf("systemctl called with %q, want %q", got, tt.wantCalls)
			}
		})
	}
}

// TestServiceStarter: with no service and no flyd binary, the error says
// what to do; with a flyd binary, the shim falls back to it.
func TestServiceStarter(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"HOME": t.TempDir()}[k] }
	err := serviceStarter(getenv, false)(context.Background())
	if !errors.Is(err, shim.ErrNoService) || !strings.Contains(err.Error(), "pass --flyd PATH") {
		t.Errorf("starter without flyd = %v, want ErrNoService with a hint", err)
	}
	err = serviceStarter(getenv, true)(context.Background())
	if !errors.Is(err, shim.ErrNoService) || strings.Contains(err.Error(), "--flyd") {
		t.Errorf("starter with flyd = %v, want a plain ErrNoService", err)
	}
}

// TestMCPRelay runs flyctl mcp in-process against a minimal flyd: one
// request, one reply, the resolved workspace and environment in headers.
func TestMCPRelay(t *testing.T) {
	dir := mcpTempDir(t)
	ws := filepath.Join(dir, "my app")
	os.Mkdir(ws, 0o755)
	link := filepath.Join(dir, "link")
	if wine.Detected() {
		link = ws // Wine 8's CreateSymbolicLink succeeds and makes no link
	} else if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	wantWS, _ := filepath.EvalSymlinks(ws)

	getenv := mcpEnv(dir, "PATH", "/usr/bin", "FLUTTER_ROOT", "/opt/flutter")
	ln, err := ipc.Listen(endpointOf(t, getenv("FLY_SOCKET")))
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

// TestMCPWorkspaceRoot: without --workspace, flyctl mcp binds to the
// project the current directory is in, and refuses the home directory,
// its ancestors and / as roots, with what to pass instead.
func TestMCPWorkspaceRoot(t *testing.T) {
	home := mcpTempDir(t)
	app := filepath.Join(home, "src", "app")
	os.MkdirAll(filepath.Join(app, "lib", "src"), 0o755)
	os.WriteFile(filepath.Join(app, "pubspec.yaml"), []byte("name: app\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x password y\n"), 0o600)

	t.Chdir(filepath.Join(app, "lib", "src"))
	if got, err := workspaceRoot("", home); err != nil || got != app {
		t.Errorf("workspaceRoot in lib/src = %q, %v, want %q", got, err, app)
	}
	t.Chdir(home)
	for _, tc := range []struct{ flag, want string }{
		{"", "home directory"},
		{"/", "file system root"},
		{filepath.Dir(home), "ancestor of your home"},
	} {
		_, err := workspaceRoot(tc.flag, home)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--workspace") {
			t.Errorf("workspaceRoot(%q) in $HOME = %v, want a refusal naming the %s and --workspace", tc.flag, err, tc.want)
		}
	}
	// Through the whole command too: nothing is started or sent.
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp"}, mcpEnv(home, "HOME", home), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "home directory") {
		t.Errorf("flyctl mcp in $HOME = %v, want a refusal", err)
	}
}

// TestMCPQuietByDefault: the shim that starts flyd writes nothing to
// stderr (an editor shows every line of it as an error); --log-level
// info says that it started flyd.
func TestMCPQuietByDefault(t *testing.T) {
	_, flyctl := flytest.Binaries(t)
	for _, tc := range []struct {
		args []string
		want string // on stderr; "" for nothing at all
	}{
		{nil, ""},
		{[]string{"--log-level", "info"}, `level=INFO msg="started flyd"`},
	} {
		// The project first: cleanups run last first, so the shim's flyd
		// is stopped before its workspace is removed (Windows refuses to
		// remove a directory a running process watches).
		root := flutterProject(t)
		e := flytest.NewEnv(t) // its own flyd, started by the shim
		cmd := exec.Command(flyctl, append([]string{"mcp", "--workspace", root}, tc.args...)...)
		cmd.Env = e.Vars
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("flyctl mcp %q: %v\n%s", tc.args, err, &stderr)
		}
		if !strings.Contains(stdout.String(), `"id":1,"result"`) {
			t.Errorf("flyctl mcp %q answered %q, want the result of initialize", tc.args, &stdout)
		}
		if got := stderr.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("flyctl mcp %q wrote to stderr:\n%s\nwant %q", tc.args, got, tc.want)
		}
	}
}
