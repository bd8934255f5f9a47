package logring

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps logring at the bottom of the dependency graph: it imports
// only the standard library, so never the daemon, store, go-sdk, websocket
// or bbolt (see STYLE.md, dependency direction).
func TestDeps(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const self = "github.com/fly-dev/fly/logring"
	out, err := exec.Command(gotool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", self).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != self {
			t.Errorf("logring depends on %s; it must import only the standard library", dep)
		}
	}
}
