package modules

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Budgets of the markdown an agent reads.
const (
	ListBudget   = 32 << 10 // fly://project/modules
	DetailBudget = 20 << 10 // fly://module/{name}
	listKeyFiles = 6        // key files per module in the list
)

// Markdown is the list of every module: kind, path, counts, key files
// and imports, within ListBudget (fewer key files each when it would
// not fit).
func (g *Graph) Markdown(project string) string {
	for _, keys := range []int{listKeyFiles, 2, 0} {
		if s := g.markdown(project, keys); len(s) <= ListBudget || keys == 0 {
			if len(s) > ListBudget {
				s = s[:ListBudget] + "\n… (cut at 32 KB: read fly://module/{name} for one)\n"
			}
			return s
		}
	}
	return ""
}

func (g *Graph) markdown(project string, keys int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Modules of %s (%d)\n\nRead fly://module/{name} for one module's key files, patterns and dependencies.\n", project, len(g.Modules))
	for _, m := range g.Modules {
		fmt.Fprintf(&b, "\n## %s\n%s, %s: %d Dart files, %d tests", m.Name, m.Kind, m.Path, m.Files, m.Tests)
		if m.Generated > 0 {
			fmt.Fprintf(&b, ", %d generated", m.Generated)
		}
		b.WriteString("\n")
		if m.Description != "" {
			b.WriteString(m.Description + "\n")
		}
		var ks []string
		for _, k := range m.KeyFiles {
			if k.Generated || len(ks) == keys {
				continue
			}
			ks = append(ks, fmt.Sprintf("%s (%s)", strings.TrimPrefix(k.Path, m.Path+"/"), k.Role))
		}
		if len(ks) > 0 {
			b.WriteString("- Key files: " + strings.Join(ks, ", ") + "\n")
		}
		if len(m.Imports) > 0 {
			b.WriteString("- Imports: " + strings.Join(m.Imports, ", ") + "\n")
		}
		if len(m.External) > 0 {
			b.WriteString("- Packages: " + strings.Join(m.External, ", ") + "\n")
		}
	}
	if len(g.Errors) > 0 {
		b.WriteString("\n## Problems\n")
		for _, e := range g.Errors {
			b.WriteString("- " + e + "\n")
		}
	}
	return b.String()
}

// Markdown is one module in the shape of the project context contract
// (a title, a description, key files with their roles, patterns,
// dependencies), within DetailBudget.
func (m *Module) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Module: %s\n\n", m.Name)
	desc := m.Description
	if desc == "" {
		desc = fmt.Sprintf("The %s %s of package %s.", path.Base(m.Path), m.Kind, m.Package)
		if m.Kind == KindPackage {
			desc = fmt.Sprintf("The package %s.", m.Package)
		}
	}
	fmt.Fprintf(&b, "%s\n\n**Kind:** %s  \n**Path:** %s  \n**Files:** %d Dart files, %d tests", desc, m.Kind, m.Path, m.Files, m.Tests)
	if m.Generated > 0 {
		fmt.Fprintf(&b, ", %d generated", m.Generated)
	}
	b.WriteString("\n\n## Key Files\n")
	cut := 0
	for _, k := range m.KeyFiles {
		entry := fmt.Sprintf("\n### %s\n**Role:** %s\n", k.Path, k.Role)
		if k.Generated {
			entry = fmt.Sprintf("\n### %s\n**Role:** generated (do not edit: regenerate with build_runner)\n", k.Path)
		}
		if b.Len()+len(entry) > DetailBudget-2<<10 {
			cut++
			continue
		}
		b.WriteString(entry)
	}
	if len(m.KeyFiles) == 0 {
		b.WriteString("\nNone recognised by name.\n")
	}
	if cut > 0 {
		fmt.Fprintf(&b, "\n… %d more key files: files_find with glob %s/**\n", cut, m.Path)
	}
	ps := m.patterns()
	fmt.Fprintf(&b, "\n## Patterns (%d)\n\n", len(ps))
	for _, p := range ps {
		b.WriteString("- " + p + "\n")
	}
	b.WriteString("\n## Dependencies\n\n")
	deps := slices.Concat(m.Imports, m.External)
	if len(deps) == 0 {
		b.WriteString("None\n")
	} else {
		if len(m.Imports) > 0 {
			b.WriteString("**Modules:** " + strings.Join(m.Imports, ", ") + "  \n")
		}
		if len(m.External) > 0 {
			b.WriteString("**Packages:** " + strings.Join(m.External, ", ") + "\n")
		}
	}
	if len(m.ImportedBy) > 0 {
		b.WriteString("\n**Imported by:** " + strings.Join(m.ImportedBy, ", ") + "\n")
	}
	s := b.String()
	if len(s) > DetailBudget {
		s = s[:DetailBudget] + "\n…\n"
	}
	return s
}

// knownPackages say what a module's imports of them mean.
var knownPackages = map[string]string{
	"provider": "state: provider", "flutter_riverpod": "state: Riverpod", "riverpod": "state: Riverpod", "hooks_riverpod": "state: Riverpod",
	"flutter_bloc": "state: BLoC (flutter_bloc)", "bloc": "state: BLoC", "get": "state and routing: GetX", "mobx": "state: MobX",
	"go_router": "routing: go_router", "auto_route": "routing: auto_route", "get_it": "dependency injection: get_it", "injectable": "dependency injection: injectable",
	"dio": "HTTP: dio", "http": "HTTP: package:http", "freezed_annotation": "immutable models: freezed", "json_annotation": "JSON: json_serializable",
	"drift": "database: drift", "sqflite": "database: sqflite", "hive": "storage: hive", "shared_preferences": "storage: shared_preferences",
	"firebase_core": "Firebase", "cloud_firestore": "Firestore", "equatable": "value equality: equatable",
}

// patterns are the conventions the module's files and imports show.
func (m *Module) patterns() []string {
	roles := map[string]int{}
	for _, k := range m.KeyFiles {
		roles[k.Role]++
	}
	var ps []string
	switch {
	case roles[RoleScreen] > 0 && roles[RoleViewModel] > 0:
		ps = append(ps, fmt.Sprintf("MVVM: %d screens with %d view models or controllers beside them", roles[RoleScreen], roles[RoleViewModel]))
	case roles[RoleBloc] > 0:
		ps = append(ps, fmt.Sprintf("BLoC: %d blocs or cubits, with their states and events", roles[RoleBloc]))
	}
	if roles[RoleRepository] > 0 {
		ps = append(ps, fmt.Sprintf("repositories (%d) stand between the UI and data sources", roles[RoleRepository]))
	}
	if roles[RoleUseCase] > 0 {
		ps = append(ps, fmt.Sprintf("use cases (%d): domain logic apart from the UI", roles[RoleUseCase]))
	}
	if m.Generated > 0 {
		ps = append(ps, fmt.Sprintf("code generation: %d generated files (dart run build_runner build)", m.Generated))
	}
	for _, p := range m.External {
		if s, ok := knownPackages[p]; ok {
			ps = append(ps, s)
		}
	}
	return ps
}

// Nearest returns up to n module names closest to name: those that
// contain it or that it contains, then by edit distance.
func (g *Graph) Nearest(name string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, m := range g.Modules {
		d := distance(strings.ToLower(name), strings.ToLower(m.Name))
		if strings.Contains(m.Name, name) || strings.Contains(name, m.Name) {
			d = 0
		}
		cs = append(cs, cand{m.Name, d})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs {
		if len(out) == n || c.d > max(3, len(name)/2) {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// distance is the Levenshtein distance of a and b, bounded in length.
func distance(a, b string) int {
	if len(a) > 64 {
		a = a[:64]
	}
	if len(b) > 64 {
		b = b[:64]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
