// Package modules finds the modules of a Flutter or Dart workspace, for
// agents that want to know where things are before they read code: the
// packages of a pub workspace or melos repository, and the feature
// folders under each package's lib/ (lib/features/*, lib/ui/*, and the
// other folders of lib/, such as lib/data). For each it gives its key
// files by role, its file and test counts, and the other modules and the
// external packages it imports, from the import and export directives of
// its Dart files.
//
// It reads files only through the os.Root it is given, and only the head
// of each Dart file (directives come first). A Builder keeps what it read
// of each file until told the file changed. It does not watch files or
// serve anything: the daemon invalidates, daemon/mcpserver renders.
package modules

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// Kinds of module.
const (
	KindPackage = "package" // a directory with a pubspec.yaml
	KindFeature = "feature" // a folder of lib/features, lib/ui, lib/screens …
	KindFolder  = "folder"  // another folder of lib/ (data, domain, routing …)
)

// Module is one module of a workspace.
type Module struct {
	Name        string    // unique in the workspace: auth, core, or pkg/auth on a clash
	Kind        string    // KindPackage, KindFeature or KindFolder
	Path        string    // its directory, relative to the root ("." for the root package)
	Package     string    // the package it belongs to
	Description string    // a package's pubspec description
	Files       int       // its Dart files (a package's: all under lib/ and bin/)
	Tests       int       // test files for it
	Generated   int       // generated Dart files among Files
	KeyFiles    []KeyFile // by role, then path; generated files last
	Imports     []string  // the other modules it imports, sorted
	ImportedBy  []string  // the modules that import it, sorted
	External    []string  // the packages outside the workspace it imports, sorted
}

// KeyFile is a file of a module with what it is for.
type KeyFile struct {
	Path      string
	Role      string
	Generated bool
}

// Graph is every module of a workspace, sorted by path.
type Graph struct {
	Modules []*Module
	Errors  []string // files that could not be read, limits reached
}

// Find returns the module named name, or nil.
func (g *Graph) Find(name string) *Module {
	for _, m := range g.Modules {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Names returns every module's name.
func (g *Graph) Names() []string {
	out := make([]string, len(g.Modules))
	for i, m := range g.Modules {
		out[i] = m.Name
	}
	return out
}

// Limits of what a build reads.
const (
	headBytes     = 16 << 10 // of each Dart file: directives come first
	maxDartRead   = 50_000   // Dart files read for imports
	maxPubspec    = 1 << 20
	maxKeyPerRole = 12 // key files of one role in a module
)

// featureParents are the folders of lib/ whose subfolders are features.
var featureParents = []string{"features", "feature", "modules", "ui", "screens", "pages", "views", "presentation"}

// Builder builds graphs, keeping the directives it read of each file
// until Forget. It is safe for concurrent use.
type Builder struct {
	mu      sync.Mutex
	imports map[string][]string // path → the URIs it imports or exports
	epoch   uint64              // moves with every Forget: a read from before is not kept
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{imports: make(map[string][]string)} }

// Forget drops what was read of paths (changed or removed files).
func (b *Builder) Forget(paths ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epoch++
	for _, p := range paths {
		delete(b.imports, p)
	}
}

// Stale reports whether a change of these files may change the graph.
func Stale(added, updated, removed []string) bool {
	if len(added) > 0 || len(removed) > 0 {
		return true
	}
	for _, p := range updated {
		if strings.HasSuffix(p, ".dart") || path.Base(p) == "pubspec.yaml" {
			return true
		}
	}
	return false
}

// pkg is a package of the workspace.
type pkg struct {
	dir, name string
	mod       *Module
}

// Build computes the graph of the workspace opened as root, whose served
// files (sorted, slash-separated) are files.
func (b *Builder) Build(root *os.Root, files []string) (*Graph, error) {
	if _, err := root.Stat("."); err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	g := &Graph{}
	// Packages: every directory with a pubspec.yaml, deepest first when
	// looking a file up.
	var pkgs []*pkg
	for _, f := range files {
		if path.Base(f) != "pubspec.yaml" {
			continue
		}
		dir := path.Dir(f)
		name, desc, err := readPubspec(root, f)
		if err != nil {
			g.Errors = append(g.Errors, err.Error())
		}
		if name == "" {
			name = path.Base(dir)
			if dir == "." {
				name = "root"
			}
		}
		p := &pkg{dir: dir, name: name}
		p.mod = &Module{Name: name, Kind: KindPackage, Path: dir, Package: name, Description: desc}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 { // a tree without a pubspec: lib/ still has folders
		p := &pkg{dir: ".", name: "root"}
		p.mod = &Module{Name: "root", Kind: KindPackage, Path: ".", Package: "root"}
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b *pkg) int { return len(b.dir) - len(a.dir) })
	pkgOf := func(f string) *pkg {
		for _, p := range pkgs {
			if p.dir == "." || strings.HasPrefix(f, p.dir+"/") {
				return p
			}
		}
		return nil
	}
	byPath := map[string]*Module{} // module dir → module
	for _, p := range pkgs {
		byPath[p.dir] = p.mod
	}
	// Folder and feature modules, from the Dart files under each lib/.
	owner := make(map[string]*Module, len(files)) // Dart file → its module
	var dart []string
	for _, f := range files {
		p := pkgOf(f)
		if p == nil {
			continue
		}
		rel := strings.TrimPrefix(f, p.dir+"/")
		if p.dir == "." {
			rel = f
		}
		top, _, _ := strings.Cut(rel, "/")
		if top == "test" || top == "integration_test" || top == "test_driver" {
			if strings.HasSuffix(f, "_test.dart") {
				p.mod.Tests++
				if m := testedModule(p, rel, byPath); m != nil && m != p.mod {
					m.Tests++
				}
			}
			continue
		}
		if !strings.HasSuffix(f, ".dart") || (top != "lib" && top != "bin") {
			continue
		}
		dart = append(dart, f)
		m := p.mod
		if dir := moduleDir(rel); dir != "" {
			full := path.Join(p.dir, dir)
			if m = byPath[full]; m == nil {
				kind := KindFolder
				if slices.Contains(featureParents, path.Base(path.Dir(dir))) {
					kind = KindFeature
				}
				m = &Module{Name: path.Base(dir), Kind: kind, Path: full, Package: p.name}
				byPath[full] = m
			}
			m.Files++
		}
		p.mod.Files++
		owner[f] = m
		gen := generated(f)
		if gen {
			m.Generated++
			if m != p.mod {
				p.mod.Generated++
			}
		}
		if role := roleOf(rel); role != "" {
			m.KeyFiles = append(m.KeyFiles, KeyFile{Path: f, Role: role, Generated: gen})
		}
	}
	for _, m := range byPath {
		g.Modules = append(g.Modules, m)
	}
	slices.SortFunc(g.Modules, func(a, b *Module) int { return strings.Compare(a.Path, b.Path) })
	uniqueNames(g.Modules)

	// Imports between modules, and of outside packages.
	pkgByName := map[string]*pkg{}
	for _, p := range pkgs {
		pkgByName[p.name] = p
	}
	b.read(root, dart, g)
	imports := map[*Module]map[*Module]bool{}
	external := map[*Module]map[string]bool{}
	b.mu.Lock()
	for _, f := range dart {
		from := owner[f]
		for _, uri := range b.imports[f] {
			var target string
			switch {
			case strings.HasPrefix(uri, "dart:"):
				continue
			case strings.HasPrefix(uri, "package:"):
				name, rest, _ := strings.Cut(strings.TrimPrefix(uri, "package:"), "/")
				p := pkgByName[name]
				if p == nil {
					if external[from] == nil {
						external[from] = map[string]bool{}
					}
					external[from][name] = true
					continue
				}
				target = path.Join(p.dir, "lib", rest)
			case strings.Contains(uri, ":"):
				continue
			default:
				target = path.Join(path.Dir(f), uri)
			}
			to := owner[target]
			if to == nil || to == from {
				continue
			}
			if imports[from] == nil {
				imports[from] = map[*Module]bool{}
			}
			imports[from][to] = true
		}
	}
	b.mu.Unlock()
	for from, tos := range imports {
		for to := range tos {
			from.Imports = append(from.Imports, to.Name)
			to.ImportedBy = append(to.ImportedBy, from.Name)
		}
	}
	for from, names := range external {
		for n := range names {
			from.External = append(from.External, n)
		}
	}
	for _, m := range g.Modules {
		slices.Sort(m.Imports)
		slices.Sort(m.ImportedBy)
		slices.Sort(m.External)
		m.Imports, m.ImportedBy = slices.Compact(m.Imports), slices.Compact(m.ImportedBy)
		sortKeyFiles(m)
	}
	return g, nil
}

// moduleDir is the module folder of a file of a package (rel to the
// package): lib/features/auth for lib/features/auth/x.dart, lib/data for
// lib/data/repos/x.dart, "" for lib/main.dart and bin/.
func moduleDir(rel string) string {
	parts := strings.Split(rel, "/")
	if parts[0] != "lib" || len(parts) < 3 {
		return ""
	}
	if parts[1] == "src" { // lib/src/… is a package's private lib/
		if len(parts) < 4 {
			return ""
		}
		parts = parts[1:]
		if slices.Contains(featureParents, parts[1]) && len(parts) >= 4 {
			return path.Join("lib/src", parts[1], parts[2])
		}
		return path.Join("lib/src", parts[1])
	}
	if slices.Contains(featureParents, parts[1]) && len(parts) >= 4 {
		return path.Join("lib", parts[1], parts[2])
	}
	return path.Join("lib", parts[1])
}

// testedModule is the module a test (rel to its package) is for, by the
// test tree mirroring lib/: test/features/auth/… tests lib/features/auth.
func testedModule(p *pkg, rel string, byPath map[string]*Module) *Module {
	_, rest, _ := strings.Cut(rel, "/")
	if dir := moduleDir("lib/" + rest); dir != "" {
		return byPath[path.Join(p.dir, dir)]
	}
	return nil
}

// uniqueNames gives modules that share a name their package's name as a
// prefix: a package keeps its own.
func uniqueNames(ms []*Module) {
	count := map[string]int{}
	for _, m := range ms {
		count[m.Name]++
	}
	for _, m := range ms {
		if count[m.Name] > 1 && m.Kind != KindPackage {
			m.Name = m.Package + "/" + m.Name
		}
	}
}

// read fills the builder's directives of the files it has not read yet,
// a few at a time.
func (b *Builder) read(root *os.Root, files []string, g *Graph) {
	b.mu.Lock()
	var todo []string
	for _, f := range files {
		if _, ok := b.imports[f]; !ok {
			todo = append(todo, f)
		}
	}
	epoch := b.epoch
	b.mu.Unlock()
	if len(todo) > maxDartRead {
		g.Errors = append(g.Errors, fmt.Sprintf("%d Dart files; the imports of only %d were read", len(todo), maxDartRead))
		todo = todo[:maxDartRead]
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Go(func() { // owned by read: it waits for them
			for f := range work {
				uris, err := directives(root, f)
				mu.Lock()
				if err != nil && len(g.Errors) < 20 {
					g.Errors = append(g.Errors, err.Error())
				}
				mu.Unlock()
				b.mu.Lock()
				if b.epoch == epoch {
					b.imports[f] = uris
				}
				b.mu.Unlock()
			}
		})
	}
	for _, f := range todo {
		work <- f
	}
	close(work)
	wg.Wait()
}

// directiveRE matches an import, export or part directive's URI.
var directiveRE = regexp.MustCompile(`^\s*(?:import|export)\s+['"]([^'"]+)['"]`)

// directives returns the URIs a Dart file imports or exports, from its
// head.
func directives(root *os.Root, name string) ([]string, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, headBytes))
	sc.Buffer(make([]byte, 0, 4096), headBytes)
	uris := []string{}
	for sc.Scan() {
		line := sc.Text()
		if m := directiveRE.FindStringSubmatch(line); m != nil {
			uris = append(uris, m[1])
			continue
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "class ") || strings.HasPrefix(t, "void main") {
			break // directives come before any declaration
		}
	}
	return uris, nil
}

// readPubspec reads a package's name and description.
func readPubspec(root *os.Root, name string) (pkgName, desc string, err error) {
	f, err := openRegular(root, name)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPubspec+1))
	if err != nil {
		return "", "", err
	}
	if len(data) > maxPubspec {
		return "", "", fmt.Errorf("%s: larger than %d bytes", name, maxPubspec)
	}
	var p struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := unmarshal(data, &p); err != nil {
		return "", "", fmt.Errorf("%s: %v", name, firstLine(err.Error()))
	}
	if len(p.Description) > 300 {
		p.Description = p.Description[:300] + "…"
	}
	return p.Name, strings.TrimSpace(p.Description), nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// unmarshal is yaml.Unmarshal that survives the parser's panics on
// hostile input.
func unmarshal(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return yaml.Unmarshal(data, v)
}

// openRegular opens name through root for reading, never blocking (a
// FIFO put where a file was would hang a blocking open), and only if it
// is a regular file.
func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return f, nil
}
