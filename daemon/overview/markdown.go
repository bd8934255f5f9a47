package overview

import (
	"fmt"
	"strings"
)

// Markdown is the overview as an agent reads it best: the project's
// name and type, its stack, dependencies, entry points, tests and
// packages. The JSON form (the Overview itself) holds the same and more.
func (o *Overview) Markdown(path string) string {
	var b strings.Builder
	name := o.Name
	if name == "" {
		name = "(no pubspec.yaml name)"
	}
	fmt.Fprintf(&b, "# Project: %s\n\n**Type:** %s  \n**Path:** %s\n", name, o.ProjectType, path)
	if o.Description != "" {
		fmt.Fprintf(&b, "\n%s\n", o.Description)
	}
	b.WriteString("\n## Tech Stack\n\n")
	stack := "Dart"
	if o.IsFlutter {
		stack = "Flutter, Dart"
	}
	fmt.Fprintf(&b, "- **Stack:** %s\n", stack)
	if o.SDK != "" || o.Flutter != "" {
		fmt.Fprintf(&b, "- **SDK:** Dart %s", orAny(o.SDK))
		if o.Flutter != "" {
			fmt.Fprintf(&b, ", Flutter %s", o.Flutter)
		}
		b.WriteString("\n")
	}
	if len(o.Platforms) > 0 {
		fmt.Fprintf(&b, "- **Platforms:** %s\n", strings.Join(o.Platforms, ", "))
	}
	pm := "pub"
	if len(o.Workspace) > 0 {
		pm = fmt.Sprintf("pub workspace (%s)", strings.Join(o.Workspace, ", "))
	}
	fmt.Fprintf(&b, "- **Package manager:** %s", pm)
	if o.Version != "" {
		fmt.Fprintf(&b, "\n- **Version:** %s", o.Version)
	}
	b.WriteString("\n")
	if len(o.Entrypoints) > 0 {
		fmt.Fprintf(&b, "- **Entry points:** %s\n", strings.Join(o.Entrypoints, ", "))
	}
	tests := "none"
	switch {
	case o.HasTests && o.HasIntegrationTests:
		tests = "test/ and integration_test/"
	case o.HasTests:
		tests = "test/"
	case o.HasIntegrationTests:
		tests = "integration_test/"
	}
	fmt.Fprintf(&b, "- **Tests:** %s\n", tests)
	for _, sec := range []struct {
		title string
		deps  []Dependency
	}{{"Dependencies", o.Dependencies}, {"Dev dependencies", o.DevDependencies}, {"Dependency overrides", o.DependencyOverrides}} {
		if len(sec.deps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s (%d)\n\n", sec.title, len(sec.deps))
		var items []string
		for _, d := range sec.deps {
			s := d.Name
			switch {
			case d.Source != "":
				s += " (" + d.Source + ")"
			case d.Resolved != "":
				s += " " + d.Resolved
			case d.Constraint != "":
				s += " " + d.Constraint
			}
			items = append(items, s)
		}
		b.WriteString(strings.Join(items, ", ") + "\n")
	}
	if len(o.NestedPackages) > 0 {
		fmt.Fprintf(&b, "\n## Packages (%d)\n\n", len(o.NestedPackages))
		for _, p := range o.NestedPackages {
			fmt.Fprintf(&b, "- %s: %s\n", p.Path, orAny(p.Name))
		}
	}
	if len(o.Errors) > 0 {
		b.WriteString("\n## Problems\n\n")
		for _, e := range o.Errors {
			b.WriteString("- " + e + "\n")
		}
	}
	return b.String()
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}
