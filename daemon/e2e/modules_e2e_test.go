package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModulesThroughShim: an agent reads the project as markdown, its
// modules, one module, is told a module does not exist with the nearest
// names, and sees a feature folder appear after a file is added.
func TestModulesThroughShim(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"pubspec.yaml":                        "name: shop\nworkspace:\n  - packages/core\ndependencies:\n  flutter:\n    sdk: flutter\n",
		"lib/main.dart":                       "import 'features/auth/login_screen.dart';\nvoid main() {}\n",
		"lib/features/auth/login_screen.dart": "import 'package:core/core.dart';\nimport '../../data/auth_repository.dart';\n",
		"lib/features/home/home_screen.dart":  "import 'package:shop/data/auth_repository.dart';\n",
		"lib/data/auth_repository.dart":       "import 'package:core/core.dart';\n",
		"test/features/auth/login_test.dart":  "void main() {}\n",
		"packages/core/pubspec.yaml":          "name: core\n",
		"packages/core/lib/core.dart":         "class Core {}\n",
	})
	n := newNotes()
	cs := viaShim(e)(t, "modules", root, n)
	ctx := context.Background()

	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fly://project/overview"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Contents[0]; c.MIMEType != "text/markdown" || !strings.Contains(c.Text, "# Project: shop") || !strings.Contains(c.Text, "- auth (feature, lib/features/auth") {
		t.Errorf("overview = %s %q", c.MIMEType, c.Text)
	}
	js, _ := readText(t, cs, "fly://project/overview?format=json")
	var ov struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(js), &ov); err != nil || ov.Name != "shop" {
		t.Errorf("overview as JSON = %v %q", err, js)
	}

	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fly://project/modules"}); err != nil {
		t.Fatal(err)
	}
	list, _ := readText(t, cs, "fly://project/modules")
	for _, s := range []string{"## auth\nfeature, lib/features/auth: 1 Dart files, 1 tests", "## core\npackage, packages/core", "## data\nfolder, lib/data", "- Imports: core, data"} {
		if !strings.Contains(list, s) {
			t.Errorf("modules lack %q:\n%s", s, list)
		}
	}
	auth, _ := readText(t, cs, "fly://module/auth")
	for _, s := range []string{"# Module: auth", "### lib/features/auth/login_screen.dart\n**Role:** screen", "## Dependencies", "**Modules:** core, data", "**Imported by:** shop"} {
		if !strings.Contains(auth, s) {
			t.Errorf("fly://module/auth lacks %q:\n%s", s, auth)
		}
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fly://module/auht"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(we.Message, "Module not found: auht") || !strings.Contains(we.Message, "auth") {
		t.Errorf("an unknown module: %v", err)
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "fly://module/{name}"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "h"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "home" {
		t.Errorf("completion of h = %+v %v", comp, err)
	}

	// A new feature: the subscriber is told, and the next read has it.
	writeTree(t, root, map[string]string{"lib/features/settings/settings_page.dart": "import 'package:core/core.dart';\n"})
	n.waitUpdated(t, "fly://project/modules")
	flytest.Eventually(t, "the settings module", func() bool {
		list, _ := readText(t, cs, "fly://project/modules")
		return strings.Contains(list, "## settings\nfeature, lib/features/settings: 1 Dart files")
	})
	if s, _ := readText(t, cs, "fly://module/settings"); !strings.Contains(s, "settings_page.dart\n**Role:** screen") {
		t.Errorf("fly://module/settings = %s", s)
	}
}
