package modules

import (
	"path"
	"slices"
	"strings"
)

// Roles of key files, in the order a module lists them.
const (
	RoleEntry      = "entry point"
	RoleLibrary    = "library"
	RoleRoutes     = "routes"
	RoleScreen     = "screen"
	RoleViewModel  = "view model"
	RoleBloc       = "bloc/cubit"
	RoleState      = "state"
	RoleRepository = "repository"
	RoleService    = "service"
	RoleUseCase    = "use case"
	RoleModel      = "model"
	RoleDI         = "dependency injection"
	RoleTheme      = "theme"
	RoleGenerated  = "generated"
)

var roleOrder = []string{RoleEntry, RoleLibrary, RoleRoutes, RoleScreen, RoleViewModel, RoleBloc, RoleState,
	RoleRepository, RoleService, RoleUseCase, RoleModel, RoleDI, RoleTheme, RoleGenerated}

// generatedSuffixes are the names code generators give their output.
var generatedSuffixes = []string{".g.dart", ".freezed.dart", ".gr.dart", ".config.dart", ".mocks.dart", ".gen.dart", ".pb.dart", ".pbenum.dart", ".pbjson.dart"}

// generated reports whether a Dart file is a code generator's output.
func generated(name string) bool {
	base := path.Base(name)
	for _, s := range generatedSuffixes {
		if strings.HasSuffix(base, s) {
			return true
		}
	}
	return base == "generated_plugin_registrant.dart" || strings.Contains(name, "/generated/") || strings.HasPrefix(base, "app_localizations")
}

// roleOf is what a Dart file of a package (rel to the package) is for,
// from the names Flutter projects give such files; "" for the rest.
func roleOf(rel string) string {
	if generated(rel) {
		return RoleGenerated
	}
	base := strings.TrimSuffix(path.Base(rel), ".dart")
	dir := path.Dir(rel)
	has := func(suffixes ...string) bool {
		for _, s := range suffixes {
			if strings.HasSuffix(base, s) || base == strings.TrimPrefix(s, "_") {
				return true
			}
		}
		return false
	}
	inDir := func(names ...string) bool {
		for _, d := range strings.Split(dir, "/") {
			if slices.Contains(names, d) {
				return true
			}
		}
		return false
	}
	switch {
	case dir == "lib" && strings.HasPrefix(base, "main") || dir == "bin":
		return RoleEntry
	case has("_router", "_routes", "_route", "router", "routes") || inDir("routing", "router", "routes"):
		return RoleRoutes
	case has("_screen", "_page"):
		return RoleScreen
	case has("_view_model", "_viewmodel", "_controller", "_notifier", "_provider", "_store"):
		return RoleViewModel
	case has("_bloc", "_cubit"):
		return RoleBloc
	case has("_state", "_event", "_events"):
		return RoleState
	case has("_repository", "_repo") || inDir("repositories", "repository"):
		return RoleRepository
	case has("_service", "_api", "_client", "_datasource", "_data_source") || inDir("services", "api"):
		return RoleService
	case has("_use_case", "_usecase") || inDir("use_cases", "usecases"):
		return RoleUseCase
	case has("_model", "_entity", "_dto") || inDir("models", "model", "entities"):
		return RoleModel
	case has("injection", "_injection", "locator", "dependencies", "_di", "di", "providers"):
		return RoleDI
	case has("_theme", "theme", "_colors", "colors"):
		return RoleTheme
	case has("_view") && !inDir("widgets"):
		return RoleScreen
	case dir == "lib":
		return RoleLibrary
	}
	return ""
}

// sortKeyFiles orders a module's key files by role, then path, keeping
// at most maxKeyPerRole of each role.
func sortKeyFiles(m *Module) {
	slices.SortFunc(m.KeyFiles, func(a, b KeyFile) int {
		if d := slices.Index(roleOrder, a.Role) - slices.Index(roleOrder, b.Role); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	var out []KeyFile
	n := map[string]int{}
	for _, k := range m.KeyFiles {
		if n[k.Role]++; n[k.Role] <= maxKeyPerRole {
			out = append(out, k)
		}
	}
	m.KeyFiles = out
}
