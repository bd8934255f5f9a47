package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
)

// conformanceDir holds the third-party checks and their npm packages.
func conformanceDir(t testing.TB) string { return flytest.ConformanceDir(t) }

// TestThirdPartyClients drives flyctl mcp with unmodified third-party MCP
// clients, the official TypeScript SDK client and the MCP Inspector CLI:
// initialize, every page of resources/list, templates, whole and ranged
// reads, subscribe with an update, and refused escapes; and the SDK's v2
// client in MCP 2026-07-28: discover, a listen stream, a stateless call.
func TestThirdPartyClients(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
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
		// Last: it adds a file to the workspace.
		{"typescript-sdk-2026", node, "client-modern.mjs"},
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
