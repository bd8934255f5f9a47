package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/localclient"
	"golang.org/x/sys/unix"
)

// TestFullSpoolHoldsBack: the holder's spool can take no more (a
// file-size limit on the holder: its writes fail with EFBIG) while flyd
// is away. The holder stops reading, the app blocks on its full pipe,
// the state file says why, and no line is dropped: the next flyd's acks
// give the room back, and it has every line once.
func TestFullSpoolHoldsBack(t *testing.T) {
	t.Parallel()
	// Enough lines to fill a 1 MiB spool file several times over.
	const floodLines = 60_000
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvLines+"="+strconv.Itoa(floodLines), fakeflutter.EnvLinesPerSec+"=40000",
		fakeflutter.EnvStartupMS+"=1000")
	args := []string{"--stored-log-lines", "400000"}
	d := flytest.StartFlyd(t, e, args...)
	root := flutterProject(t)
	cs := viaShim(e)(t, "flooder", root, nil)
	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	st := heldState(t, e, started.RunID)
	limit := unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := unix.Prlimit(st.Holder.PID, unix.RLIMIT_FSIZE, &limit, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	cs.Close()
	d.Kill(t)
	flytest.Eventually(t, "the holder saying its spool is full", func() bool { return heldState(t, e, started.RunID).Spool != "" })
	if tick := lastTickSpool(e, started.RunID); tick >= floodLines {
		t.Fatalf("the spool took all %d lines under a 1 MiB file limit", tick)
	}
	if !st.Child.Same() {
		t.Fatal("the app died of its full pipe")
	}
	t.Logf("spool full: %s", heldState(t, e, started.RunID).Spool)

	flytest.StartFlyd(t, e, args...)
	t.Cleanup(func() {
		if t.Failed() {
			dir := filepath.Join(e.Paths.Runs(), started.RunID)
			ents, _ := os.ReadDir(dir)
			for _, en := range ents {
				if fi, err := en.Info(); err == nil {
					t.Logf("%s %d bytes", en.Name(), fi.Size())
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, "holder.log"))
			t.Logf("the holder's log (%v):\n%s", err, b)
		}
	})
	flytest.Eventually(t, "the next flyd taking the flood in", func() bool { return lastTick(t, e, started.RunID) == floodLines })
	checkEveryTickOnce(t, e, started.RunID, floodLines)
	var b strings.Builder
	for _, l := range logLines(t, e, started.RunID, localclient.AllLines) {
		if l.Stream == "fly" {
			b.WriteString(l.Text + "\n")
		}
	}
	if !strings.Contains(b.String(), "spool is full") {
		t.Errorf("the run's log does not say its holder's spool was full:\n%s", b.String())
	}
}
