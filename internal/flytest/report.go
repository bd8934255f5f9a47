package flytest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/localclient"
)

// Bounds of a failed test's report of its runs.
const (
	reportLines     = 30      // of each run's log, its newest lines
	reportFileBytes = 8 << 10 // of each holder's log, its end
)

// WineStartHung starts the report's line for a run whose flutter Wine
// never started (see startHung): .ci/wine/gotest runs the tests of a
// failure that says it once more, as it does for Wine's failed starts.
const WineStartHung = "wine: the run's cmd.exe never started its flutter"

// runsReport is what a failed test shows of the runs of a flyd that is
// still up: each run's state and newest log lines, and what each run's
// holder wrote down (its state file, its own log, whether it and its
// child live). A run that never got going says here why.
func runsReport(socket, runsDir string) string {
	var b strings.Builder
	lc := localclient.New(socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := lc.Runs(ctx)
	if err != nil {
		fmt.Fprintf(&b, "runs: %v\n", err)
	} else {
		for _, r := range list.Runs {
			fmt.Fprintf(&b, "run %s: kind %s, state %s, pid %d, holder %q %s\n", r.RunID, r.Kind, r.State, r.PID, r.Holder, r.Degraded)
			b.WriteString(logTail(ctx, lc, r.RunID))
		}
	}
	ents, _ := os.ReadDir(runsDir)
	for _, e := range ents {
		dir := filepath.Join(runsDir, e.Name())
		if st, err := holder.ReadState(dir); err != nil {
			fmt.Fprintf(&b, "holder of %s: %v\n", e.Name(), err)
		} else {
			fmt.Fprintf(&b, "holder of %s: pid %d (alive %v), child %d (alive %v), exit %+v, spool %q\n",
				e.Name(), st.Holder.PID, st.Holder.Same(), st.Child.PID, st.Child.Same(), st.Exit, st.Spool)
			if st.Child.Same() {
				procs := descendants(st.Child.PID)
				fmt.Fprintf(&b, "its child's processes: %s\n", strings.Join(procs, ", "))
				if startHung(procs) {
					fmt.Fprintf(&b, "%s (run %s)\n", WineStartHung, e.Name())
				}
			}
		}
		fmt.Fprintf(&b, "its log:\n%s\n", fileEnd(filepath.Join(dir, "holder.log"), reportFileBytes))
	}
	return b.String()
}

// logTail is a run's newest log lines, as flyd sends them.
func logTail(ctx context.Context, lc *localclient.Client, id string) string {
	s, err := lc.Logs(ctx, id, localclient.LogsOptions{Tail: reportLines})
	if err != nil {
		return fmt.Sprintf("  its log: %v\n", err)
	}
	defer s.Close()
	var b strings.Builder
	for {
		line, err := s.NextRaw()
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(&b, "  (%v)\n", err)
			}
			return b.String()
		}
		fmt.Fprintf(&b, "  %s\n", line)
	}
}

// fileEnd is the last max bytes of a file, or why it cannot be read.
func fileEnd(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return err.Error()
	}
	return string(b)
}
