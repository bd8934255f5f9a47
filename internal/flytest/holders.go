package flytest

import (
	"os"
	"path/filepath"

	"github.com/fly-dev/fly/internal/holder"
	"github.com/fly-dev/fly/internal/proc"
)

// KillHolders kills the runs, and their holders, whose directories are in
// dir (an Env's Paths.Runs()): what a test that killed flyd leaves running.
// It returns how many runs it found alive.
func KillHolders(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		st, err := holder.ReadState(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		alive := false
		if st.Child.Same() {
			alive = true
			_ = proc.SignalGroup(st.Child.PID, proc.Kill)
		}
		if st.Holder.Same() {
			alive = true
			_ = proc.SignalProcess(st.Holder.PID, proc.Kill)
		}
		if alive {
			n++
		}
	}
	return n
}
