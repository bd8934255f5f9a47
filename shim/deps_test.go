package shim

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the shim tiny: it must never link the MCP SDK, bbolt or
// the daemon's packages (see STYLE.md, dependency direction).
func TestDeps(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(gotool, "list", "-deps", "github.com/fly-dev/fly/shim").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/modelcontextprotocol/go-sdk",
		"go.etcd.io/bbolt",
		"github.com/fly-dev/fly/daemon",
		"github.com/fly-dev/fly/store",
		"github.com/fly-dev/fly/logring",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("shim depends on %s; it must not import %s", dep, f)
			}
		}
	}
}
