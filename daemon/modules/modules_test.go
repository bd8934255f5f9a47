package modules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
)

// appWorkspace is a pub workspace shaped like a real app: the app at the
// root with feature folders and a data layer, two packages beside it.
var appWorkspace = map[string]string{
	"pubspec.yaml": "name: shop\ndescription: A shop app.\nworkspace:\n  - packages/core\n  - packages/ui_kit\n" +
		"dependencies:\n  flutter:\n    sdk: flutter\n",
	"lib/main.dart":                                 "import 'package:flutter/material.dart';\nimport 'routing/router.dart';\nvoid main() {}\n",
	"lib/routing/router.dart":                       "import 'package:go_router/go_router.dart';\nimport '../features/auth/login_screen.dart';\nimport '../features/home/home_screen.dart';\n",
	"lib/features/auth/login_screen.dart":           "import 'package:flutter/material.dart';\nimport 'login_view_model.dart';\nimport 'package:ui_kit/ui_kit.dart';\nclass LoginScreen {}\n",
	"lib/features/auth/login_view_model.dart":       "import 'package:shop/data/auth_repository.dart';\nimport 'package:provider/provider.dart';\n",
	"lib/features/auth/user.freezed.dart":           "part of 'user.dart';\n",
	"lib/features/home/home_screen.dart":            "import '../../data/products_repository.dart';\nimport 'package:core/core.dart';\n",
	"lib/features/home/widgets/product_tile.dart":   "import 'package:ui_kit/ui_kit.dart';\n",
	"lib/data/auth_repository.dart":                 "import 'package:core/core.dart';\nimport 'package:dio/dio.dart';\n",
	"lib/data/products_repository.dart":             "export 'package:core/src/models/product.dart';\n",
	"lib/data/services/api_client.dart":             "import 'package:dio/dio.dart';\n",
	"test/features/auth/login_view_model_test.dart": "void main() {}\n",
	"test/features/home/home_screen_test.dart":      "void main() {}\n",
	"test/widget_test.dart":                         "void main() {}\n",
	"packages/core/pubspec.yaml":                    "name: core\ndescription: Models and helpers.\n",
	"packages/core/lib/core.dart":                   "export 'src/models/product.dart';\n",
	"packages/core/lib/src/models/product.dart":     "class Product {}\n",
	"packages/core/lib/src/models/product.g.dart":   "part of 'product.dart';\n",
	"packages/core/test/product_test.dart":          "void main() {}\n",
	"packages/ui_kit/pubspec.yaml":                  "name: ui_kit\n",
	"packages/ui_kit/lib/ui_kit.dart":               "export 'src/button.dart';\n",
	"packages/ui_kit/lib/src/button.dart":           "import 'package:core/core.dart';\nclass Button {}\n",
	"packages/ui_kit/lib/src/theme/app_theme.dart":  "class AppTheme {}\n",
	"build/app/outputs/ignored.dart":                "import 'package:nothing/x.dart';\n", // not served: not passed to Build
}

func build(t *testing.T, tree map[string]string) *Graph {
	t.Helper()
	dir := t.TempDir()
	flytest.WriteTree(t, dir, tree)
	var files []string
	for p := range tree {
		if !strings.HasPrefix(p, "build/") {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	g, err := NewBuilder().Build(root, files)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestPubWorkspace(t *testing.T) {
	g := build(t, appWorkspace)
	type want struct {
		kind, path    string
		files, tests  int
		imports, exts string
		keys          []string // "path role"
	}
	wants := map[string]want{
		"shop":    {KindPackage, ".", 10, 3, "routing", "flutter", []string{"lib/main.dart entry point"}},
		"auth":    {KindFeature, "lib/features/auth", 3, 1, "data, ui_kit", "flutter, provider", []string{"lib/features/auth/login_screen.dart screen", "lib/features/auth/login_view_model.dart view model", "lib/features/auth/user.freezed.dart generated"}},
		"home":    {KindFeature, "lib/features/home", 2, 1, "core, data, ui_kit", "", []string{"lib/features/home/home_screen.dart screen"}},
		"data":    {KindFolder, "lib/data", 3, 0, "core, models", "dio", []string{"lib/data/auth_repository.dart repository", "lib/data/products_repository.dart repository", "lib/data/services/api_client.dart service"}},
		"routing": {KindFolder, "lib/routing", 1, 0, "auth, home", "go_router", []string{"lib/routing/router.dart routes"}},
		"core":    {KindPackage, "packages/core", 3, 1, "models", "", []string{"packages/core/lib/core.dart library"}},
		"ui_kit":  {KindPackage, "packages/ui_kit", 3, 0, "core", "", []string{"packages/ui_kit/lib/ui_kit.dart library"}},
	}
	for name, w := range wants {
		m := g.Find(name)
		if m == nil {
			t.Errorf("no module %s in %v", name, g.Names())
			continue
		}
		if m.Kind != w.kind || m.Path != w.path || m.Files != w.files || m.Tests != w.tests {
			t.Errorf("%s = %s %s %d files %d tests, want %s %s %d %d", name, m.Kind, m.Path, m.Files, m.Tests, w.kind, w.path, w.files, w.tests)
		}
		if got := strings.Join(m.Imports, ", "); got != w.imports {
			t.Errorf("%s imports %q, want %q", name, got, w.imports)
		}
		if got := strings.Join(m.External, ", "); got != w.exts {
			t.Errorf("%s packages %q, want %q", name, got, w.exts)
		}
		for _, k := range w.keys {
			p, role, _ := strings.Cut(k, " ")
			if !slices.ContainsFunc(m.KeyFiles, func(kf KeyFile) bool { return kf.Path == p && kf.Role == role }) {
				t.Errorf("%s lacks key file %s (%s): %+v", name, p, role, m.KeyFiles)
			}
		}
	}
	// core's sources live under lib/src/models: a folder module of core.
	if m := g.Find("models"); m == nil || m.Package != "core" || m.Generated != 1 {
		t.Errorf("core's lib/src/models = %+v", m)
	}
	if got := g.Find("core").ImportedBy; !slices.Contains(got, "home") || !slices.Contains(got, "ui_kit") {
		t.Errorf("core is imported by %v", got)
	}
	md := g.Find("auth").Markdown()
	for _, s := range []string{"# Module: auth", "### lib/features/auth/login_screen.dart\n**Role:** screen", "generated (do not edit", "## Patterns (", "MVVM", "state: provider", "## Dependencies", "**Modules:** data, ui_kit"} {
		if !strings.Contains(md, s) {
			t.Errorf("auth's markdown lacks %q:\n%s", s, md)
		}
	}
	list := g.Markdown("shop")
	for _, s := range []string{"# Modules of shop (", "## auth\nfeature, lib/features/auth: 3 Dart files, 1 tests, 1 generated", "- Imports: data, ui_kit"} {
		if !strings.Contains(list, s) {
			t.Errorf("the list lacks %q:\n%s", s, list)
		}
	}
	if near := g.Nearest("auht", 3); len(near) == 0 || near[0] != "auth" {
		t.Errorf("nearest to auht = %v", near)
	}
}

// TestSinglePackage: an app without a workspace, its lib/ folders as
// modules; a name shared by two folders is told apart by its package.
func TestSinglePackage(t *testing.T) {
	g := build(t, map[string]string{
		"pubspec.yaml":                       "name: todo\n",
		"lib/main.dart":                      "import 'ui/list/list_page.dart';\n",
		"lib/ui/list/list_page.dart":         "import '../../blocs/todo_bloc.dart';\n",
		"lib/blocs/todo_bloc.dart":           "import 'package:flutter_bloc/flutter_bloc.dart';\nimport 'todo_state.dart';\n",
		"lib/blocs/todo_state.dart":          "",
		"lib/generated/l10n.dart":            "",
		"example/pubspec.yaml":               "name: example\n",
		"example/lib/ui/list/list_page.dart": "",
	})
	if got := strings.Join(g.Names(), " "); got != "todo example example/list blocs generated todo/list" {
		t.Errorf("names = %q", got)
	}
	b := g.Find("blocs")
	if b == nil || !slices.ContainsFunc(b.KeyFiles, func(k KeyFile) bool { return k.Role == RoleBloc }) || !slices.Contains(b.ImportedBy, "todo/list") {
		t.Errorf("blocs = %+v", b)
	}
	if g.Find("generated").Generated != 1 {
		t.Errorf("lib/generated is not marked generated: %+v", g.Find("generated"))
	}
}

// FuzzDirectives: any Dart head is read without a panic.
func FuzzDirectives(f *testing.F) {
	f.Add("import 'package:a/b.dart';\nexport \"x.dart\" show Y;\nclass A {}\nimport 'late.dart';")
	f.Add("")
	f.Fuzz(func(t *testing.T, src string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.dart"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		uris, err := directives(root, "a.dart")
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range uris {
			if strings.ContainsAny(u, "'\"\n") {
				t.Fatalf("uri %q", u)
			}
		}
	})
}

// TestBuilderKeepsUntilForget: a rebuild reads only what it was told
// changed, and sees the change.
func TestBuilderKeepsUntilForget(t *testing.T) {
	dir := t.TempDir()
	tree := map[string]string{
		"pubspec.yaml": "name: app\n",
		"lib/a/a.dart": "import '../b/b.dart';\n",
		"lib/b/b.dart": "",
		"lib/c/c.dart": "",
	}
	flytest.WriteTree(t, dir, tree)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files := []string{"lib/a/a.dart", "lib/b/b.dart", "lib/c/c.dart", "pubspec.yaml"}
	b := NewBuilder()
	g, _ := b.Build(root, files)
	if got := g.Find("a").Imports; !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a imports %v", got)
	}
	flytest.WriteTree(t, dir, map[string]string{"lib/a/a.dart": "import '../c/c.dart';\n"})
	if g, _ := b.Build(root, files); !slices.Equal(g.Find("a").Imports, []string{"b"}) {
		t.Errorf("a rebuild read a file it was not told changed: %v", g.Find("a").Imports)
	}
	b.Forget("lib/a/a.dart")
	if g, _ := b.Build(root, files); !slices.Equal(g.Find("a").Imports, []string{"c"}) {
		t.Errorf("after Forget, a imports %v, want c", g.Find("a").Imports)
	}
}

// TestFIFONeverBlocks: a FIFO where a Dart file or a pubspec was is
// skipped, not waited on.
func TestFIFONeverBlocks(t *testing.T) {
	dir := t.TempDir()
	flytest.WriteTree(t, dir, map[string]string{"lib/a/a.dart": "import '../b/b.dart';\n", "lib/b/b.dart": ""})
	for _, p := range []string{"pubspec.yaml", "lib/a/fifo.dart"} {
		flytest.Mkfifo(t, filepath.Join(dir, filepath.FromSlash(p)))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	g, err := NewBuilder().Build(root, []string{"lib/a/a.dart", "lib/a/fifo.dart", "lib/b/b.dart", "pubspec.yaml"})
	if err != nil || !slices.Equal(g.Find("a").Imports, []string{"b"}) || len(g.Errors) != 2 {
		t.Errorf("a tree with FIFOs: %v, %+v", err, g)
	}
}
