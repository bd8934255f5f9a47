package index

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"
)

// Rules decide which workspace files are served. A file is served when its
// extension or its exact base name is allowlisted, it is not a secret, it is
// not a skipped file, and none of its directories is skipped. Secrets and
// skipped directories are fixed: no allowlist can serve them.
type Rules struct {
	Extensions []string // with dot, lower case: ".dart", ".yaml", ...
	Names      []string // exact base names: "CMakeLists.txt", "Podfile", "gradle.properties"
}

// DefaultRules returns the allowlist of DESIGN §4: the source and config
// types of a Flutter repository.
func DefaultRules() Rules {
	return Rules{
		Extensions: []string{
			".dart", ".yaml", ".yml", ".gradle", ".kt", ".kts", ".swift", ".mm", ".m",
			".xml", ".plist", ".json", ".arb", ".md", ".lock", ".html", ".js", ".css",
			".h", ".c", ".cc", ".cpp", ".toml", ".txt",
		},
		Names: []string{"CMakeLists.txt", "Podfile", "gradle.properties", ".metadata"},
	}
}

// served reports whether the file rel (slash-separated, clean, relative to
// the workspace root) is served.
func (r Rules) served(rel string) bool {
	dir, name := path.Split(rel)
	return r.allowed(name) && servable(rel) && (dir == "" || !skipDir(dir[:len(dir)-1]))
}

// allowed reports whether the base name is allowlisted, by extension (case
// insensitive) or by exact name.
func (r Rules) allowed(name string) bool {
	for _, n := range r.Names {
		if name == n {
			return true
		}
	}
	ext := nameExt(name)
	if ext == "" {
		return false
	}
	for _, e := range r.Extensions {
		if len(e) == len(ext) && strings.EqualFold(e, ext) {
			return true
		}
	}
	return false
}

// ruleMatcher is Rules compiled for the walk: the hot path of an index build
// asks it once per directory entry.
type ruleMatcher struct {
	exts  map[string]struct{} // lower case
	names map[string]struct{}
}

func (r Rules) compile() ruleMatcher {
	m := ruleMatcher{
		exts:  make(map[string]struct{}, len(r.Extensions)),
		names: make(map[string]struct{}, len(r.Names)),
	}
	for _, e := range r.Extensions {
		m.exts[strings.ToLower(e)] = struct{}{}
	}
	for _, n := range r.Names {
		m.names[n] = struct{}{}
	}
	return m
}

// servedName reports whether a file of this base name, in a directory
// whose own base name is parent, is served, provided that its directory
// is not skipped.
func (m ruleMatcher) servedName(parent, name string) bool {
	if _, ok := m.names[name]; !ok {
		e := nameExt(name)
		if e == "" {
			return false
		}
		if _, ok := m.exts[e]; !ok {
			if !hasUpperASCII(e) {
				return false
			}
			if _, ok := m.exts[strings.ToLower(e)]; !ok {
				return false
			}
		}
	}
	return !skipFile(name) && !secretName(parent, name) && utf8.ValidString(name) && NameRefusal(name) == ""
}

// served is Rules.served for a compiled ruleMatcher.
func (m ruleMatcher) served(rel string) bool {
	dir, name := path.Split(rel)
	return m.servedName(path.Base(path.Dir(rel)), name) && (dir == "" || !skipDir(dir[:len(dir)-1]))
}

// servable reports whether the file rel may be served at all: it is
// neither a secret nor a skipped file, and its name names no other file.
func servable(rel string) bool {
	name := path.Base(rel)
	return !isSecret(rel) && !skipFile(name) && utf8.ValidString(rel) && NameRefusal(name) == ""
}

// isSecret reports whether rel names a file that is never served, whatever
// the allowlist says: signing keys, keystores, certificates, local
// properties, .env files and well-known credential files. The base name
// counts, and for a few files its directory, compared as fold does on
// every system: on a case-insensitive one (Windows, macOS), KEY.PROPERTIES
// is key.properties.
func isSecret(rel string) bool {
	return secretName(path.Base(path.Dir(rel)), path.Base(rel))
}

// secretName is isSecret for the file name in a directory whose base
// name is parent.
func secretName(parent, name string) bool {
	name = fold(name)
	switch name {
	case "key.properties", "local.properties", ".env", ".envrc",
		".netrc", "_netrc", ".git-credentials", "pub-credentials.json", "credentials.json",
		"application_default_credentials.json", ".npmrc", ".pypirc", ".pgpass":
		return true
	case "hosts.yml", "hosts.yaml": // gh's tokens
		return fold(parent) == "gh"
	case "config.json": // docker's auths
		return fold(parent) == ".docker"
	}
	if strings.HasPrefix(name, ".env.") {
		return true
	}
	switch nameExt(name) {
	case ".jks", ".keystore", ".p12", ".pfx", ".pem", ".key":
		return true
	}
	return false
}

// skipFile reports whether a file of this base name is tool state that is
// skipped (not a secret): .flutter-plugins* and *.iml.
func skipFile(name string) bool {
	return strings.HasPrefix(name, ".flutter-plugins") || strings.HasSuffix(name, ".iml")
}

// skipDirNames are directory names that are skipped wherever they appear.
var skipDirNames = map[string]struct{}{
	"build":        {},
	".dart_tool":   {},
	".git":         {},
	".idea":        {},
	".gradle":      {},
	"Pods":         {},
	"node_modules": {},
	".fvm":         {},
	".pub-cache":   {},
	".pub":         {},
	".symlinks":    {}, // ios/.symlinks
	".ssh":         {},
	".aws":         {},
	".gnupg":       {},
	".docker":      {},
	".kube":        {},
}

// hiddenDirsServed are the hidden directories a project commonly keeps
// source or configuration in; every other directory whose name starts
// with a dot is skipped (tool state, caches, credentials).
var hiddenDirsServed = map[string]struct{}{
	".github":       {},
	".gitlab":       {},
	".circleci":     {},
	".buildkite":    {},
	".devcontainer": {},
	".vscode":       {},
	".run":          {}, // IntelliJ run configurations
	".husky":        {},
	".well-known":   {}, // web/.well-known: app links
}

// skipDir reports whether the directory rel (slash-separated, relative) or
// any of its ancestors is skipped: build outputs, tool caches, VCS data,
// CocoaPods, and the Flutter/ephemeral directories of the platform folders.
func skipDir(rel string) bool {
	parent := ""
	for rel != "" {
		elem := rel
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			elem, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		if skipDirElem(parent, elem) {
			return true
		}
		parent = elem
	}
	return false
}

// skipDirElem reports whether a directory named elem, inside a directory
// named parent ("" for the root), is skipped.
func skipDirElem(parent, elem string) bool {
	if _, ok := skipDirNames[elem]; ok {
		return true
	}
	if !utf8.ValidString(elem) {
		return true // no URI names it exactly: see Refusal
	}
	if NameRefusal(elem) != "" {
		return true // Windows would read it as another name: see NameRefusal
	}
	if strings.HasPrefix(elem, ".") {
		_, ok := hiddenDirsServed[elem]
		return !ok
	}
	return elem == "ephemeral" && (parent == "Flutter" || parent == "flutter")
}

// IsGenerated reports whether rel is a generated source file: it is served
// but marked as generated.
func IsGenerated(rel string) bool {
	name := path.Base(rel)
	return strings.HasSuffix(name, ".g.dart") ||
		strings.HasSuffix(name, ".freezed.dart") ||
		strings.HasSuffix(name, ".mocks.dart") ||
		strings.HasPrefix(name, "GeneratedPluginRegistrant.")
}

// nameExt returns the extension of a base name, from its last dot, or "" when
// there is none. Unlike path.Ext, a leading dot alone (".metadata") is not
// an extension.
func nameExt(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return ""
	}
	return name[i:]
}

func hasUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// Refusal says why rules do not serve rel, or "" when they do.
func (r Rules) Refusal(rel string) string {
	if !utf8.ValidString(rel) {
		// A URI is text: such a name could only be served through an
		// escape that some clients decode lossily. It is left out of
		// lists, searches and reads alike.
		return "its name is not valid UTF-8, and flyd leaves such files out everywhere"
	}
	for _, el := range strings.Split(rel, "/") {
		if why := NameRefusal(el); why != "" {
			return why
		}
	}
	dir := path.Dir(rel)
	for d := dir; d != "."; d = path.Dir(d) {
		if skipDir(d) {
			return "it is under " + d + "/, which flyd never serves"
		}
	}
	switch {
	case isSecret(rel):
		return "it is a secret file (keys, keystores, .env), which flyd never serves"
	case !r.served(rel):
		return "its file type is not on the allowlist"
	}
	return ""
}

// singleLink reports whether the open file f, whose FileInfo is fi, has
// exactly one hard link: one of several could be a file outside the
// workspace.
func singleLink(f *os.File, fi fs.FileInfo) bool {
	n, err := LinkCount(f, fi)
	return err == nil && n == 1
}
