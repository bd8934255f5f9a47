//go:build unix

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRunEnvFilled: a client that hands the shim only PATH and HOME (as
// Codex and the TypeScript SDK hand their servers a handful of
// variables) still gets a run with the user's toolchain: what the client
// left out comes from the user's login shell, then flyd's own toolchain
// variables, never overriding what the client passed, never flyd's other
// variables; and the run's log says where its environment came from.
func TestRunEnvFilled(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	// The user's login shell: it sets ANDROID_HOME (and what this test's
	// fake flutter is steered by, which the client does not pass), then
	// does what sh -c does.
	shell := filepath.Join(t.TempDir(), "loginsh")
	script := "#!/bin/sh\nexport ANDROID_HOME=/opt/android-from-login FLY_TEST_HELPER=flutter " +
		fakeflutter.EnvTickMS + "=0 " + fakeflutter.EnvPrintEnv + "=JAVA_HOME,ANDROID_HOME,ONLY_FLYD,HOME\n" +
		"shift 3\ns=\"$1\"; shift\nexec /bin/sh -c \"$s\" \"$@\"\n"
	if err := os.WriteFile(shell, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	client := []string{"PATH=" + getVar(e.Vars, "PATH"), "HOME=" + t.TempDir(),
		paths.EnvSocket + "=" + e.Paths.Socket, paths.EnvStateDir + "=" + e.Paths.StateDir, paths.EnvConfigDir + "=" + e.Paths.ConfigDir}
	e.Vars = append(e.Vars, "SHELL=/nonexistent/not-this-one", "JAVA_HOME=/opt/jdk-from-flyd", "ONLY_FLYD=x")
	flytest.StartFlyd(t, e, "--login-shell", shell)

	_, flyctl := flytest.Binaries(t)
	root := flutterProject(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", root)
	cmd.Env = client
	cmd.Stderr = os.Stderr
	cs := connectClient(t, "few-vars", &mcp.CommandTransport{Command: cmd}, nil)

	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	defer callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil)
	var text string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text, "env HOME=") && time.Now().Before(deadline); {
		text = toolText(callTool(t, cs, "logs_read", map[string]any{"run_id": run.RunID}, nil))
	}
	for _, want := range []string{
		"env JAVA_HOME=/opt/jdk-from-flyd",         // flyd's own toolchain
		"env ANDROID_HOME=/opt/android-from-login", // the login shell
		"env ONLY_FLYD=<unset>",                    // not flyd's other variables
		"env HOME=" + getVar(client, "HOME"),       // the client's, kept
		"filled in from the login shell " + shell,
		"from flyd's own: JAVA_HOME",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the run's log lacks %q:\n%s", want, text)
		}
	}
}

// getVar is the value of name in an environment list.
func getVar(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}
