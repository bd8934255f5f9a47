// Package overview derives a Flutter or Dart project's overview (the
// fly://project/overview resource) from pubspec.yaml, pubspec.lock,
// .metadata and the list of the workspace's files, without running flutter
// or dart. It reads files only through the os.Root it is given. It does not
// own the file list (daemon/index), caching, or how the overview is served
// (daemon).
package overview

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Overview is the fly://project/overview resource (served as JSON,
// application/json). It is derived from pubspec.yaml, pubspec.lock,
// .metadata and the file tree, without running flutter or dart.
//
// A missing pubspec.yaml is not an error: HasPubspec is false and the rest
// is what the tree says. Problems in the files read (bad YAML, wrong types,
// unknown dependency forms, oversized files) are listed in Errors, one
// "file: line N: message" per problem, and the fields they concern stay
// empty. Fields may be added; their meaning does not change.
type Overview struct {
	HasPubspec  bool   `json:"has_pubspec"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`    // 1.2.3+45: versionName+buildNumber
	PublishTo   string `json:"publish_to,omitempty"` // "none" for apps
	SDK         string `json:"sdk,omitempty"`        // environment.sdk
	Flutter     string `json:"flutter,omitempty"`    // environment.flutter

	// IsFlutter reports whether dependencies holds flutter: {sdk: flutter}.
	IsFlutter bool `json:"is_flutter"`
	// ProjectType is project_type from .metadata (app, package, plugin,
	// plugin_ffi, module, skeleton, ...); without it, "plugin" if
	// flutter.plugin is set, else "app" for a Flutter project, else
	// "package".
	ProjectType string `json:"project_type"`
	// Platforms lists, in a fixed order, the platform folders present:
	// android, ios, web, macos, linux, windows.
	Platforms []string `json:"platforms"`

	Dependencies        []Dependency `json:"dependencies"`
	DevDependencies     []Dependency `json:"dev_dependencies"`
	DependencyOverrides []Dependency `json:"dependency_overrides"`

	HasTests            bool     `json:"has_tests"`             // a file under test/
	HasIntegrationTests bool     `json:"has_integration_tests"` // a file under integration_test/
	Entrypoints         []string `json:"entrypoints"`           // lib/main*.dart, not main.g.dart
	AssetsCount         int      `json:"assets_count"`          // entries of flutter.assets
	LockResolved        bool     `json:"lock_resolved"`         // pubspec.lock exists

	// NestedPackages are the other directories holding a pubspec.yaml, such
	// as example/ and packages/*, sorted by path.
	NestedPackages []NestedPackage `json:"nested_packages"`
	// Workspace is the pub workspace member list (pubspec "workspace:").
	Workspace []string `json:"workspace,omitempty"`
	// Resolution is "workspace" in a member of a pub workspace.
	Resolution string `json:"resolution,omitempty"`

	Errors []string `json:"errors,omitempty"`
}

// Dependency is one entry of dependencies, dev_dependencies or
// dependency_overrides.
type Dependency struct {
	Name string `json:"name"`
	// Constraint is the version constraint: the plain value, or the version
	// key of a map form. A null or empty value is "any".
	Constraint string `json:"constraint,omitempty"`
	// Source says where a non-default package comes from: "sdk:flutter",
	// "path:../x", "git:URL" or "hosted:URL".
	Source  string `json:"source,omitempty"`
	GitRef  string `json:"git_ref,omitempty"`
	GitPath string `json:"git_path,omitempty"`
	// Resolved is the version pubspec.lock resolved, if any.
	Resolved string `json:"resolved,omitempty"`
}

// NestedPackage is a directory below the root that holds a pubspec.yaml.
type NestedPackage struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// Size limits of the files Build reads. Larger files are reported
// in Overview.Errors and skipped.
const (
	maxPubspecSize  = 1 << 20
	maxLockSize     = 8 << 20
	maxMetadataSize = 1 << 20

	// maxNestedPackages bounds the nested pubspec.yaml files read.
	maxNestedPackages = 500
)

var platformDirs = []string{"android", "ios", "web", "macos", "linux", "windows"}

// Build computes the project overview of the workspace opened as
// root. files is the sorted list of the workspace's served files (slash
// separated, relative to root), as the index holds it. Every read goes
// through root. It is safe to call concurrently.
//
// The error is non-nil only when the root itself cannot be read; problems
// with the project's files are reported in Overview.Errors.
func Build(root *os.Root, files []string) (*Overview, error) {
	if _, err := root.Stat("."); err != nil {
		return nil, fmt.Errorf("project overview: %w", err)
	}
	ov := &Overview{
		Platforms:           []string{},
		Dependencies:        []Dependency{},
		DevDependencies:     []Dependency{},
		DependencyOverrides: []Dependency{},
		Entrypoints:         []string{},
		NestedPackages:      []NestedPackage{},
	}

	var plugin bool
	data, err := readCapped(root, "pubspec.yaml", maxPubspecSize)
	ov.HasPubspec = !errors.Is(err, fs.ErrNotExist)
	if err != nil && ov.HasPubspec {
		ov.Errors = append(ov.Errors, err.Error())
	}
	if err == nil {
		f := yamlFile{name: "pubspec.yaml"}
		plugin = f.parsePubspec(data, ov)
		ov.Errors = append(ov.Errors, f.errs...)
	}

	if data, err := readCapped(root, "pubspec.lock", maxLockSize); !errors.Is(err, fs.ErrNotExist) {
		ov.LockResolved = true
		if err != nil {
			ov.Errors = append(ov.Errors, err.Error())
		} else {
			f := yamlFile{name: "pubspec.lock"}
			resolved := f.parseLock(data)
			ov.Errors = append(ov.Errors, f.errs...)
			for _, deps := range [][]Dependency{ov.Dependencies, ov.DevDependencies, ov.DependencyOverrides} {
				for i := range deps {
					deps[i].Resolved = resolved[deps[i].Name]
				}
			}
		}
	}

	if data, err := readCapped(root, ".metadata", maxMetadataSize); err == nil {
		f := yamlFile{name: ".metadata"}
		ov.ProjectType = f.parseMetadata(data)
		ov.Errors = append(ov.Errors, f.errs...)
	} else if !errors.Is(err, fs.ErrNotExist) {
		ov.Errors = append(ov.Errors, err.Error())
	}
	if ov.ProjectType == "" {
		switch {
		case plugin:
			ov.ProjectType = "plugin"
		case ov.IsFlutter:
			ov.ProjectType = "app"
		default:
			ov.ProjectType = "package"
		}
	}

	for _, dir := range platformDirs {
		if fi, err := root.Stat(dir); err == nil && fi.IsDir() {
			ov.Platforms = append(ov.Platforms, dir)
		}
	}

	nested := 0
	for _, name := range files {
		switch {
		case strings.HasPrefix(name, "test/"):
			ov.HasTests = true
		case strings.HasPrefix(name, "integration_test/"):
			ov.HasIntegrationTests = true
		}
		if ok, _ := path.Match("lib/main*.dart", name); ok && strings.Count(path.Base(name), ".") == 1 {
			ov.Entrypoints = append(ov.Entrypoints, name)
		}
		if dir, base := path.Split(name); base == "pubspec.yaml" && dir != "" {
			nested++
			if nested <= maxNestedPackages {
				ov.NestedPackages = append(ov.NestedPackages, nestedPackage(root, name, &ov.Errors))
			}
		}
	}
	if nested > maxNestedPackages {
		ov.Errors = append(ov.Errors, fmt.Sprintf("%d nested packages; only the first %d are listed", nested, maxNestedPackages))
	}
	slices.Sort(ov.Entrypoints)
	slices.SortFunc(ov.NestedPackages, func(a, b NestedPackage) int { return strings.Compare(a.Path, b.Path) })
	return ov, nil
}

// nestedPackage reads the name of the package whose pubspec.yaml is at
// name. Problems are appended to errs.
func nestedPackage(root *os.Root, name string, errs *[]string) NestedPackage {
	p := NestedPackage{Path: path.Dir(name)}
	data, err := readCapped(root, name, maxPubspecSize)
	if err != nil {
		*errs = append(*errs, err.Error())
		return p
	}
	f := yamlFile{name: name}
	var nested Overview
	f.parsePubspec(data, &nested)
	*errs = append(*errs, f.errs...)
	p.Name = nested.Name
	return p
}

// readCapped reads the regular file name from root. Files over limit bytes,
// and anything but a regular file (a FIFO would block the open), are
// refused. A missing file gives an error matching fs.ErrNotExist.
func readCapped(root *os.Root, name string, limit int64) ([]byte, error) {
	fi, err := root.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit; not read", name, fi.Size(), limit)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: over the %d-byte limit; not read", name, limit)
	}
	return data, nil
}

// yamlFile walks the YAML of one file and collects its problems, each
// prefixed with the file name and, when known, the line.
type yamlFile struct {
	name string
	errs []string
}

func (f *yamlFile) errorf(n *yaml.Node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n != nil && n.Line > 0 {
		msg = fmt.Sprintf("line %d: %s", n.Line, msg)
	}
	f.errs = append(f.errs, f.name+": "+msg)
}

// parse returns the top-level mapping of data, or nil if there is none.
// An empty document is an empty mapping.
func (f *yamlFile) parse(data []byte) *yaml.Node {
	var doc yaml.Node
	if err := unmarshalYAML(data, &doc); err != nil {
		f.errs = append(f.errs, f.name+": "+strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	if doc.Kind == 0 { // empty, or only comments
		return &yaml.Node{Kind: yaml.MappingNode}
	}
	top := doc.Content[0]
	if top = yamlDeref(top); top == nil || top.Kind != yaml.MappingNode {
		if !yamlNull(top) {
			f.errorf(top, "the document is %s, want a map", yamlKind(top))
			return nil
		}
		return &yaml.Node{Kind: yaml.MappingNode}
	}
	return top
}

// unmarshalYAML is yaml.Unmarshal made safe for untrusted input: the
// daemon is shared, so a parser panic becomes an error.
func unmarshalYAML(data []byte, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml parser failed: %v", r)
		}
	}()
	return yaml.Unmarshal(data, n)
}

// yamlPair is one key and value of a mapping.
type yamlPair struct {
	key   string
	kn, v *yaml.Node
}

// pairs returns the entries of mapping n in order. Keys that are not
// scalars, and repeated keys, are reported and left out.
func (f *yamlFile) pairs(n *yaml.Node, what string) []yamlPair {
	var out []yamlPair
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			f.errorf(k, "%s: a key is %s, want a name", what, yamlKind(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			f.errorf(k, "%s: %q repeats the key at line %d", what, k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, yamlPair{key: k.Value, kn: k, v: v})
	}
	return out
}

// str returns the value of a scalar, "" for null, and reports other kinds.
func (f *yamlFile) str(n *yaml.Node, what string) string {
	n = yamlDeref(n)
	switch {
	case yamlNull(n):
		return ""
	case n.Kind == yaml.ScalarNode:
		return n.Value
	}
	f.errorf(n, "%s is %s, want a string", what, yamlKind(n))
	return ""
}

// mapping returns n if it is a mapping, nil for null, and reports other
// kinds.
func (f *yamlFile) mapping(n *yaml.Node, what string) *yaml.Node {
	n = yamlDeref(n)
	switch {
	case yamlNull(n):
		return nil
	case n.Kind == yaml.MappingNode:
		return n
	}
	f.errorf(n, "%s is %s, want a map", what, yamlKind(n))
	return nil
}

// parsePubspec fills ov from the pubspec in data and reports whether the
// package is a plugin (flutter.plugin is set).
func (f *yamlFile) parsePubspec(data []byte, ov *Overview) (plugin bool) {
	top := f.parse(data)
	if top == nil {
		return false
	}
	nameReported := false
	for _, p := range f.pairs(top, "top level") {
		switch p.key {
		case "name":
			n := len(f.errs)
			ov.Name = f.str(p.v, "name")
			nameReported = len(f.errs) > n
		case "description":
			ov.Description = f.str(p.v, "description")
		case "version":
			ov.Version = f.str(p.v, "version")
		case "publish_to":
			ov.PublishTo = f.str(p.v, "publish_to")
		case "resolution":
			ov.Resolution = f.str(p.v, "resolution")
		case "environment":
			if env := f.mapping(p.v, "environment"); env != nil {
				for _, e := range f.pairs(env, "environment") {
					switch e.key {
					case "sdk":
						ov.SDK = f.str(e.v, "environment.sdk")
					case "flutter":
						ov.Flutter = f.str(e.v, "environment.flutter")
					}
				}
			}
		case "dependencies":
			ov.Dependencies = f.dependencies(p.v, p.key)
		case "dev_dependencies":
			ov.DevDependencies = f.dependencies(p.v, p.key)
		case "dependency_overrides":
			ov.DependencyOverrides = f.dependencies(p.v, p.key)
		case "workspace":
			ov.Workspace = f.stringList(p.v, "workspace")
		case "flutter":
			if fl := f.mapping(p.v, "flutter"); fl != nil {
				for _, e := range f.pairs(fl, "flutter") {
					switch e.key {
					case "plugin":
						plugin = !yamlNull(yamlDeref(e.v))
					case "assets":
						ov.AssetsCount = len(f.list(e.v, "flutter.assets"))
					}
				}
			}
		}
	}
	if ov.Name == "" && !nameReported {
		f.errorf(nil, "no name")
	}
	ov.IsFlutter = slices.ContainsFunc(ov.Dependencies, func(d Dependency) bool {
		return d.Name == "flutter" && d.Source == "sdk:flutter"
	})
	return plugin
}

// list returns the items of a sequence, none for null, and reports other
// kinds.
func (f *yamlFile) list(n *yaml.Node, what string) []*yaml.Node {
	n = yamlDeref(n)
	switch {
	case yamlNull(n):
		return nil
	case n.Kind == yaml.SequenceNode:
		return n.Content
	}
	f.errorf(n, "%s is %s, want a list", what, yamlKind(n))
	return nil
}

// stringList returns a sequence of strings.
func (f *yamlFile) stringList(n *yaml.Node, what string) []string {
	var out []string
	for _, item := range f.list(n, what) {
		if s := f.str(item, what+" item"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// dependencies parses one dependency section, sorted by name.
func (f *yamlFile) dependencies(n *yaml.Node, section string) []Dependency {
	deps := []Dependency{}
	m := f.mapping(n, section)
	if m == nil {
		return deps
	}
	for _, p := range f.pairs(m, section) {
		deps = append(deps, f.dependency(p.key, p.v, section+"."+p.key))
	}
	slices.SortFunc(deps, func(a, b Dependency) int { return strings.Compare(a.Name, b.Name) })
	return deps
}

// dependency parses the value of one dependency: a version constraint, null,
// or a map of sdk, path, git, hosted and version.
func (f *yamlFile) dependency(name string, v *yaml.Node, what string) Dependency {
	d := Dependency{Name: name}
	v = yamlDeref(v)
	switch {
	case yamlNull(v):
		d.Constraint = "any"
		return d
	case v.Kind == yaml.ScalarNode:
		d.Constraint = v.Value
		if d.Constraint == "" {
			d.Constraint = "any"
		}
		return d
	case v.Kind != yaml.MappingNode:
		f.errorf(v, "%s is %s, want a version or a map", what, yamlKind(v))
		return d
	}
	unknown := false
	setSource := func(n *yaml.Node, source string) {
		if d.Source != "" {
			f.errorf(n, "%s has more than one source", what)
			return
		}
		d.Source = source
	}
	for _, p := range f.pairs(v, what) {
		switch p.key {
		case "version":
			d.Constraint = f.str(p.v, what+".version")
		case "sdk":
			setSource(p.kn, "sdk:"+f.str(p.v, what+".sdk"))
		case "path":
			setSource(p.kn, "path:"+f.str(p.v, what+".path"))
		case "git":
			g := yamlDeref(p.v)
			if g != nil && g.Kind == yaml.MappingNode {
				var url string
				for _, e := range f.pairs(g, what+".git") {
					switch e.key {
					case "url":
						url = f.str(e.v, what+".git.url")
					case "ref":
						d.GitRef = f.str(e.v, what+".git.ref")
					case "path":
						d.GitPath = f.str(e.v, what+".git.path")
					case "tag_pattern":
					default:
						f.errorf(e.kn, "%s.git: unknown key %q", what, e.key)
					}
				}
				setSource(p.kn, "git:"+url)
			} else {
				setSource(p.kn, "git:"+f.str(p.v, what+".git"))
			}
		case "hosted":
			h := yamlDeref(p.v)
			if h != nil && h.Kind == yaml.MappingNode {
				var url string
				for _, e := range f.pairs(h, what+".hosted") {
					if e.key == "url" {
						url = f.str(e.v, what+".hosted.url")
					}
				}
				setSource(p.kn, "hosted:"+url)
			} else {
				setSource(p.kn, "hosted:"+f.str(p.v, what+".hosted"))
			}
		default:
			f.errorf(p.kn, "%s: unknown key %q", what, p.key)
			unknown = true
		}
	}
	if d.Source == "" && d.Constraint == "" && !unknown {
		d.Constraint = "any"
	}
	return d
}

// parseLock returns the resolved version of each package in a pubspec.lock.
func (f *yamlFile) parseLock(data []byte) map[string]string {
	resolved := make(map[string]string)
	top := f.parse(data)
	if top == nil {
		return resolved
	}
	for _, p := range f.pairs(top, "top level") {
		if p.key != "packages" {
			continue
		}
		pkgs := f.mapping(p.v, "packages")
		if pkgs == nil {
			continue
		}
		for _, pkg := range f.pairs(pkgs, "packages") {
			m := f.mapping(pkg.v, "packages."+pkg.key)
			if m == nil {
				continue
			}
			for _, e := range f.pairs(m, "packages."+pkg.key) {
				if e.key == "version" {
					resolved[pkg.key] = f.str(e.v, "packages."+pkg.key+".version")
				}
			}
		}
	}
	return resolved
}

// parseMetadata returns project_type from a .metadata file.
func (f *yamlFile) parseMetadata(data []byte) string {
	top := f.parse(data)
	if top == nil {
		return ""
	}
	for _, p := range f.pairs(top, "top level") {
		if p.key == "project_type" {
			return f.str(p.v, "project_type")
		}
	}
	return ""
}

// yamlDeref follows aliases to the node they name. It gives up (nil) on
// chains longer than a few links, which only a hostile file has.
func yamlDeref(n *yaml.Node) *yaml.Node {
	for range 8 {
		if n == nil || n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

// yamlNull reports whether n is absent or a YAML null (~, null or nothing).
func yamlNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func yamlKind(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a map"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode:
		return "a scalar"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

// Stale reports whether a change of the workspace's files (paths relative
// to its root) may change its overview: files that came or went (entry
// points, tests, packages), or a pubspec, the lock file or .metadata
// that changed.
func Stale(added, updated, removed []string) bool {
	if len(added) > 0 || len(removed) > 0 {
		return true
	}
	for _, p := range updated {
		if path.Base(p) == "pubspec.yaml" || p == "pubspec.lock" || p == ".metadata" {
			return true
		}
	}
	return false
}
