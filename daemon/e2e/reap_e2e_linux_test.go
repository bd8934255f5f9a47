package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
)

// TestNothingOutlivesFlyd: an upstream starts three processes that leave
// its process group with setsid: one stays its child, one is orphaned at
// once (flyd, its subreaper, adopts it), and one is orphaned and drops
// the run's mark from its environment. flyd's SIGTERM stops all three.
func TestNothingOutlivesFlyd(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	dir := t.TempDir()
	script := `setsid sh -c 'echo $$ > "$0/child"; exec sleep 100000' "$0" &
( setsid sh -c 'echo $$ > "$0/orphan"; exec sleep 100000' "$0" & )
( env -u FLY_RUN_ID setsid sh -c 'echo $$ > "$0/unmarked"; exec sleep 100000' "$0" & )
exec sleep 100000`
	writeUpstreamsFile(t, e, map[string]any{
		"escaper": map[string]any{"command": "/bin/sh", "args": []string{"-c", script, dir}},
	})
	fl := flytest.StartFlyd(t, e, "--stop-grace", "1s")
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	cs := viaShim(e)(t, "agent", root, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang detector
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil { // starts the upstream
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, name := range []string{"child", "orphan", "unmarked"} {
		flytest.Eventually(t, name+" started", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, name))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			pids[name] = pid
			return err == nil && perr == nil
		})
		if !alive(pids[name]) {
			t.Fatalf("%s (pid %d) is not running", name, pids[name])
		}
	}
	cs.Close()
	fl.Stop(t)
	for name, pid := range pids {
		flytest.Eventually(t, name+" stopped with flyd", func() bool { return !alive(pid) })
	}
}
