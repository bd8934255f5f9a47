//go:build unix

package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSymlinksToSecretsRefused: a symlink in the workspace serves only
// what the rules would serve under the name it leads to. A cloned
// repository could otherwise ship lib/l10n.json -> ../android/key.properties
// (or lib/dk -> ../.docker) and a prompt that asks the agent to read it.
func TestSymlinksToSecretsRefused(t *testing.T) {
	s := newSurface(t, map[string]string{
		"pubspec.yaml":           "name: demo\n",
		"android/key.properties": "storePassword=hunter2\n",
		".docker/config.json":    `{"auths":{"x":{"auth":"c2VjcmV0"}}}`,
		"shared/strings.json":    `{"hello":"world"}`,
		"lib/main.dart":          "void main() {}\n",
	})
	for link, target := range map[string]string{
		"lib/l10n.json":    "../android/key.properties",
		"lib/dk":           "../.docker",
		"lib/strings.json": "../shared/strings.json",
	} {
		if err := os.Symlink(target, filepath.Join(s.root, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	cs := s.connect(t, "reader", nil)
	ctx := context.Background()
	for _, uri := range []string{"workspace:///lib/l10n.json", "workspace:///lib/dk/config.json"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil || !strings.Contains(err.Error(), "symlink to") {
			t.Errorf("read %s = %v, %v; want a refusal naming the symlink's target", uri, res, err)
		}
		if res != nil && len(res.Contents) > 0 && (strings.Contains(res.Contents[0].Text, "hunter2") || strings.Contains(res.Contents[0].Text, "auths")) {
			t.Errorf("read %s served the secret", uri)
		}
		tool, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_read", Arguments: map[string]any{"path": strings.TrimPrefix(uri, "workspace:///")}})
		if err != nil || !tool.IsError || strings.Contains(tool.Content[0].(*mcp.TextContent).Text, "hunter2") {
			t.Errorf("files_read %s = %+v, %v; want it refused", uri, tool, err)
		}
	}
	// A symlink to a file the rules serve is served.
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "workspace:///lib/strings.json"})
	if err != nil || !strings.Contains(res.Contents[0].Text, "world") {
		t.Errorf("read of a symlink to a served file = %v, %v", res, err)
	}
}
