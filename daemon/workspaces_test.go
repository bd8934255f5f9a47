package daemon

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/index"
)

// TestWorkspaceRefusesHome: flyd itself refuses the file system's root
// (/, or a drive's: C:\), the home directory and its ancestors as
// workspace roots, whatever client asks.
func TestWorkspaceRefusesHome(t *testing.T) {
	home := t.TempDir()
	ws := newWorkspaces(index.DefaultRules(), time.Minute, slog.New(slog.DiscardHandler), func(*workspace, index.Change) {})
	ws.home = home
	defer ws.close()
	fsRoot := filepath.VolumeName(home) + string(filepath.Separator)
	for _, dir := range []string{fsRoot, home, filepath.Dir(home)} {
		if w, err := ws.acquire(dir); err == nil {
			ws.release(w)
			t.Errorf("acquire(%s) succeeded, want a refusal", dir)
		} else if !strings.Contains(err.Error(), "not a project root") {
			t.Errorf("acquire(%s) = %v, want it to say why", dir, err)
		}
	}
}
