package layout

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/fly-dev/fly"

// Third-party modules, by the names the rules use.
const (
	goSDK     = "github.com/modelcontextprotocol/go-sdk"
	bbolt     = "go.etcd.io/bbolt"
	websocket = "github.com/coder/websocket"
	pflag     = "github.com/spf13/pflag"
	kardianos = "github.com/kardianos/service"
	xsys      = "golang.org/x/sys"
)

// rules is docs/STYLE.md's dependency table: what each package must not
// import, directly or through others. A path forbids its subpackages
// too, unless it starts with "=", which forbids that package only (the
// daemon's parts must not import the daemon, but may use each other).
var rules = []struct {
	pkg       string
	forbidden []string
}{
	{mod + "/logring", []string{mod + "/daemon", mod + "/store", goSDK, websocket, bbolt}},
	{mod + "/store", []string{mod + "/daemon", mod + "/logring", goSDK}},
	{mod + "/shim", []string{mod + "/daemon", mod + "/store", mod + "/logring", goSDK, bbolt}},
	{mod + "/daemon", []string{mod + "/cmd", mod + "/shim", pflag, kardianos}},
	{mod + "/daemon/index", []string{"=" + mod + "/daemon", goSDK, mod + "/store"}},
	{mod + "/daemon/overview", []string{"=" + mod + "/daemon", goSDK}},
	{mod + "/daemon/runs", []string{"=" + mod + "/daemon", goSDK}},
	{mod + "/daemon/upstream", []string{"=" + mod + "/daemon", mod + "/daemon/runs", mod + "/store", bbolt}},
	{mod + "/daemon/outbox", []string{mod + "/daemon", mod + "/store", goSDK, websocket, bbolt}},
	// The HTTP API and the MCP surface are handlers over what they are
	// given: neither imports the daemon, nor each other; the API speaks
	// no MCP at all.
	{mod + "/daemon/localapi", []string{"=" + mod + "/daemon", mod + "/daemon/mcpserver", mod + "/daemon/mcpconn", mod + "/daemon/upstream", goSDK, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	{mod + "/daemon/mcpserver", []string{"=" + mod + "/daemon", mod + "/daemon/localapi", mod + "/daemon/loopback", mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// The transports know nothing of sessions, workspaces, runs or tools.
	{mod + "/daemon/mcpconn", []string{"=" + mod + "/daemon", mod + "/daemon/mcpserver", mod + "/daemon/localapi", mod + "/daemon/runs", mod + "/daemon/index", mod + "/daemon/upstream", mod + "/store", bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	{mod + "/daemon/endpoint", []string{"=" + mod + "/daemon", mod + "/daemon/mcpserver", mod + "/daemon/localapi", mod + "/daemon/runs", mod + "/store", goSDK, websocket, bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	{mod + "/daemon/loopback", []string{"=" + mod + "/daemon", mod + "/daemon/mcpserver", mod + "/daemon/localapi", mod + "/daemon/runs", mod + "/store", goSDK, websocket, bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// The VM-service client speaks the Dart VM's JSON-RPC, not MCP, and
	// knows nothing of runs or the store.
	{mod + "/daemon/vmservice", []string{mod + "/daemon", goSDK, mod + "/store", bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// Finding apps through DTD files needs no run, store or MCP.
	{mod + "/daemon/dtd", []string{"=" + mod + "/daemon", mod + "/daemon/mcpserver", mod + "/daemon/localapi", mod + "/daemon/runs", goSDK, mod + "/store", bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// Reading a widget tree or a screenshot needs no connection, run or store.
	{mod + "/daemon/inspect", []string{mod + "/daemon", goSDK, websocket, mod + "/store", bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// Parsing and keeping an app's errors needs no connection, run or store.
	{mod + "/daemon/apperrors", []string{mod + "/daemon", goSDK, websocket, mod + "/store", bbolt, mod + "/cmd", mod + "/shim", pflag, kardianos}},
	// Reading the login environment needs nothing of the daemon.
	{mod + "/daemon/loginenv", []string{"=" + mod + "/daemon", goSDK, websocket, mod + "/store", bbolt, mod + "/daemon/runs"}},
	{mod + "/cmd/flyd", []string{mod + "/shim"}},
	{mod + "/cmd/flyctl", []string{mod + "/daemon", mod + "/store", bbolt}},
}

// stdlibOnly are the internal packages that several top-level packages
// share: they import nothing but the standard library and each other,
// except that the ones in usesXSys also import golang.org/x/sys (on
// Windows, and owner and proc on macOS).
var stdlibOnly = []string{mod + "/internal/paths", mod + "/internal/wire", mod + "/internal/mcpconfig", mod + "/internal/safetext", mod + "/internal/jsonscan",
	mod + "/internal/lockfile", mod + "/internal/owner", mod + "/internal/logkey", mod + "/internal/proc", mod + "/internal/fileuri"}

// usesXSys are the stdlibOnly packages that may import golang.org/x/sys.
var usesXSys = []string{mod + "/internal/lockfile", mod + "/internal/owner", mod + "/internal/proc"}

// goosList is every GOOS fly builds for: the per-OS rules are checked
// for each, whatever the machine the test runs on.
var goosList = []string{"linux", "darwin", "windows"}

// linksOnly are the internal packages that link, beyond the standard
// library, only what their row lists (with what that links), on every
// operating system fly builds for: sysmem asks the kernel through
// golang.org/x/sys; ipc also uses owner, and paths on Windows.
var linksOnly = []struct {
	pkg     string
	allowed []string
}{
	{mod + "/internal/sysmem", []string{xsys}},
	{mod + "/internal/ipc", []string{xsys, mod + "/internal/owner", mod + "/internal/paths"}},
}

// shimAllowed is everything outside the standard library the shim may
// link: it is in every editor's process list, so it stays tiny.
var shimAllowed = []string{websocket, mod + "/shim", mod + "/internal/paths", mod + "/internal/wire", mod + "/internal/lockfile", mod + "/internal/owner", mod + "/internal/logkey", mod + "/internal/proc", mod + "/internal/ipc", xsys}

type pkg struct {
	ImportPath string
	Doc        string
	Standard   bool
	Imports    []string
	Deps       []string
}

// list runs go list -deps on patterns and returns the packages it names.
func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	return listFor(t, gotool, "", args...)
}

// listFor runs go list -json for goos ("": the machine's) on args.
func listFor(t *testing.T, gotool, goos string, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command(gotool, append([]string{"list", "-json"}, args...)...)
	if goos != "" {
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list: %v", goos, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func under(dep, root string) bool { return dep == root || strings.HasPrefix(dep, root+"/") }

func TestDependencyDirection(t *testing.T) {
	byPath := map[string]pkg{}
	for _, p := range list(t, mod+"/...") {
		byPath[p.ImportPath] = p
	}
	for _, r := range rules {
		p, ok := byPath[r.pkg]
		if !ok {
			t.Errorf("package %s is gone: update the rules", r.pkg)
			continue
		}
		for _, dep := range p.Deps {
			for _, f := range r.forbidden {
				exact, isExact := strings.CutPrefix(f, "=")
				hit := under(dep, f)
				if isExact {
					hit = dep == exact
				}
				// A package may import its own subpackages.
				if hit && !under(dep, r.pkg) {
					t.Errorf("%s depends on %s: docs/STYLE.md forbids %s there", r.pkg, dep, f)
				}
			}
		}
	}
	for _, dep := range byPath[mod+"/shim"].Deps {
		if isStd(dep) {
			continue
		}
		ok := false
		for _, a := range shimAllowed {
			ok = ok || under(dep, a)
		}
		if !ok {
			t.Errorf("shim depends on %s: it may link only the standard library and %v", dep, shimAllowed)
		}
	}
}

// TestStdlibOnly checks stdlibOnly's direct imports for each GOOS fly
// builds for: their per-OS files import different things.
func TestStdlibOnly(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	for _, goos := range goosList {
		for _, p := range listFor(t, gotool, goos, stdlibOnly...) {
			for _, imp := range p.Imports {
				if isStd(imp) || slicesContain(stdlibOnly, imp) || (under(imp, xsys) && slicesContain(usesXSys, p.ImportPath)) {
					continue
				}
				t.Errorf("GOOS=%s: %s imports %s: it may use the standard library (and each other) only", goos, p.ImportPath, imp)
			}
		}
	}
}

// TestLinksOnly checks linksOnly for each GOOS fly builds for.
func TestLinksOnly(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	for _, goos := range goosList {
		for _, r := range linksOnly {
			for _, p := range listFor(t, gotool, goos, r.pkg) {
				for _, dep := range p.Deps {
					ok := isStd(dep)
					for _, a := range r.allowed {
						ok = ok || under(dep, a)
					}
					if !ok {
						t.Errorf("GOOS=%s: %s depends on %s: it may link only the standard library and %v", goos, r.pkg, dep, r.allowed)
					}
				}
			}
		}
	}
}

// isStd reports whether an import path is the standard library's: its
// first element has no dot (vendored golang.org/x inside std included).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") || strings.HasPrefix(path, "vendor/")
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestDocComments: every package says what it owns.
func TestDocComments(t *testing.T) {
	for _, p := range list(t, mod+"/...") {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no doc comment", p.ImportPath)
		}
	}
}

// TestLocalClientDeps: the client of flyd's local API links only the
// standard library, internal/paths, internal/wire and internal/ipc (with
// what they link), so that any program may speak to flyd through it.
func TestLocalClientDeps(t *testing.T) {
	const lc = mod + "/internal/localclient"
	allowed := map[string]bool{mod + "/internal/paths": true, mod + "/internal/wire": true, mod + "/internal/ipc": true}
	var deps []string
	for _, p := range list(t, lc, mod+"/internal/paths", mod+"/internal/wire", mod+"/internal/ipc") {
		if p.ImportPath == lc {
			deps = p.Deps
			continue
		}
		for _, d := range p.Deps {
			allowed[d] = true
		}
	}
	if deps == nil {
		t.Fatalf("package %s is gone: update this test", lc)
	}
	for _, dep := range deps {
		if !isStd(dep) && !allowed[dep] {
			t.Errorf("%s depends on %s: it may link only the standard library, internal/paths, internal/wire and internal/ipc", lc, dep)
		}
	}
}
