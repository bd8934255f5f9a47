package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
)

var npmMu sync.Mutex

// conformanceDir holds the third-party client checks and their npm
// packages (the official TypeScript SDK, the MCP Inspector, Node 22).
func conformanceDir(t *testing.T) string {
	// Tests that run in parallel share one npm ci.
	npmMu.Lock()
	defer npmMu.Unlock()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	installed := true
	for _, bin := range []string{"mcp-inspector", "mcp-server-everything", "mcp-server-filesystem", "conformance", "node"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", bin)); err != nil {
			installed = false
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		installed = false
	}
	if installed {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not installed: CI must run the third-party client checks")
		}
		t.Skip("npm is not installed; install Node.js and npm to run the third-party client checks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// TestThirdPartyClients drives flyctl mcp with unmodified third-party MCP
// clients, the official TypeScript SDK client and the MCP Inspector CLI:
// initialize, every page of resources/list, templates, whole and ranged
// reads, subscribe with an update, and refused escapes.
func TestThirdPartyClients(t *testing.T) {
	dir := conformanceDir(t)
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	_, flyctl := flytest.Binaries(t)

	root := t.TempDir()
	files := map[string]string{
		"pubspec.yaml":  "name: conformance\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart": "void main() {}\n",
	}
	for i := range 250 { // several pages at the default page size
		files[fmt.Sprintf("lib/src/w%03d.dart", i)] = "// w\n"
	}
	writeTree(t, root, files)
	args, _ := json.Marshal([]string{"mcp", "--workspace", root})
	vars := append(e.Vars,
		"FLY_CONF_COMMAND="+flyctl,
		"FLY_CONF_ARGS="+string(args),
		"FLY_CONF_TOUCH="+filepath.Join(root, "lib", "main.dart"),
		fmt.Sprintf("FLY_CONF_EXPECT_FILES=%d", len(files)),
	)
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	for _, c := range []struct{ name, prog, script string }{
		{"typescript-sdk", node, "client.mjs"},
		{"inspector-cli", "bash", "inspector.sh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, c.prog, filepath.Join(dir, c.script))
			cmd.Dir = dir
			cmd.Env = vars
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nsteps:\n%s\nstderr:\n%s", c.script, err, stdout.String(), stderr.String())
			}
			t.Logf("%s steps:\n%s", c.script, stdout.String())
		})
	}
}
