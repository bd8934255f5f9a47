package flytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
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

// quietFor is how long a run must have been starting without a line from
// flutter before the report may take it for a start that never happened:
// flutter prints its first line at once.
const quietFor = 30 * time.Second

// runsReport is what a failed test shows of the runs of its flyd: each
// run's state and newest log lines while flyd answers, and what each
// run's holder wrote down (its state file, its own log, whether it and
// its child live, the processes under the child), which needs no flyd.
// A run that never got going says here why.
func runsReport(socket, runsDir string) string {
	var b strings.Builder
	lc := localclient.New(socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quiet := map[string]bool{} // starting for quietFor, and not a line from flutter
	if list, err := lc.Runs(ctx); err != nil {
		fmt.Fprintf(&b, "runs: %v\n", err)
	} else {
		for _, r := range list.Runs {
			fmt.Fprintf(&b, "run %s: kind %s, state %s, pid %d, holder %q %s\n", r.RunID, r.Kind, r.State, r.PID, r.Holder, r.Degraded)
			text, flutter := logTail(ctx, lc, r.RunID)
			b.WriteString(text)
			quiet[r.RunID] = r.State == wire.RunStarting && time.Since(r.StartedAt) >= quietFor && !flutter
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
				if quiet[e.Name()] && startHung(procs) {
					fmt.Fprintf(&b, "%s (run %s, starting for over %v without a line from flutter)\n", WineStartHung, e.Name(), quietFor)
				}
			}
		}
		fmt.Fprintf(&b, "its log:\n%s\n", fileEnd(filepath.Join(dir, "holder.log"), reportFileBytes))
	}
	return b.String()
}

// logTail is a run's newest log lines, as flyd sends them, and whether
// any of them came from flutter (not flyd's own notes).
func logTail(ctx context.Context, lc *localclient.Client, id string) (text string, flutter bool) {
	s, err := lc.Logs(ctx, id, localclient.LogsOptions{Tail: reportLines})
	if err != nil {
		return fmt.Sprintf("  its log: %v\n", err), false
	}
	defer s.Close()
	var b strings.Builder
	for {
		line, err := s.NextRaw()
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(&b, "  (%v)\n", err)
			}
			return b.String(), flutter
		}
		var l wire.LogLine
		if json.Unmarshal(line, &l) == nil && l.Type == wire.LogLineEntry && l.Stream != string(logring.Fly) {
			flutter = true
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
