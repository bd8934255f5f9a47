package flytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/lockfile"
	"github.com/fly-dev/fly/internal/wine"
)

var npmMu sync.Mutex

// ConformanceDir returns testdata/conformance with its npm packages
// installed (the TypeScript SDK, the MCP Inspector, the conformance
// suite, server-everything, server-filesystem, playwright-core, Node 22),
// running npm ci first if they are missing. Tests of several packages
// run at once: a lock file keeps them to one npm ci. Without npm it
// fails in CI and skips elsewhere; under Wine it skips.
func ConformanceDir(t testing.TB) string {
	t.Helper()
	wine.SkipUnder(t, "testdata/conformance's npm packages, node among them, are the Linux host's (npm ci ran there): there is no Windows node to run")
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "conformance")
	npmMu.Lock()
	defer npmMu.Unlock()
	lock, err := lockfile.Lock(context.Background(), filepath.Join(dir, ".npm.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	installed := true
	for _, p := range []string{".bin/mcp-inspector", ".bin/mcp-server-everything", ".bin/mcp-server-filesystem", ".bin/conformance", ".bin/node", "playwright-core"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			installed = false
		}
	}
	if installed {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not installed: CI must run the third-party checks")
		}
		t.Skip("npm is not installed; install Node.js and npm to run the third-party checks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}
