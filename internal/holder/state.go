package holder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
)

// The state file of a run's directory (see the package doc).

// stateFile is its name in the run's directory.
const stateFile = "state"

// maxState bounds what a reader takes of a state file.
const maxState = 64 << 10

// State is what a holder says of itself and its run.
type State struct {
	Format    int    `json:"format"`
	Run       string `json:"run"`
	Protocol  Range  `json:"protocol"`
	Holder    Proc   `json:"holder"`
	Child     Proc   `json:"child"`
	Control   string `json:"control"`
	Job       uint64 `json:"job,omitempty"`
	VMService string `json:"vm_service_uri,omitempty"`
	Spool     string `json:"spool,omitempty"` // why the spool is full; "" while it is not
	Exit      *Exit  `json:"exit,omitempty"`
}

// Range is the protocol versions a side speaks.
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Proc names a process: its pid and internal/proc's start time of it.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Exit is how a run's child ended.
type Exit struct {
	Code int    `json:"code"` // -1 when a signal ended it
	Desc string `json:"desc"` // "exit code 1", "killed by killed"
	Seq  uint64 `json:"seq,omitempty"`
}

// Same reports whether p is still the process it names: alive, this
// user's, and started when it was.
func (p Proc) Same() bool {
	if p.PID <= 0 || !owner.Current().Runs(p.PID) {
		return false
	}
	if ok, err := proc.Alive(p.PID); !ok || err != nil {
		return false
	}
	start, err := proc.StartTime(p.PID)
	return err == nil && start != 0 && start == p.Start
}

// ReadState reads the state file of the run directory dir, bounded and
// checked. A file of another format fails with an error wrapping
// ErrFormat.
func ReadState(dir string) (State, error) {
	f, err := os.Open(filepath.Join(dir, stateFile))
	if err != nil {
		return State{}, fmt.Errorf("read holder state: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxState+1))
	if err != nil {
		return State{}, fmt.Errorf("read holder state: %w", err)
	}
	if len(b) > maxState {
		return State{}, fmt.Errorf("read holder state: over %d bytes", maxState)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("read holder state: %w", err)
	}
	switch {
	case st.Format != spoolFormat:
		return st, fmt.Errorf("read holder state: %w (format %d, this flyd reads %d)", ErrFormat, st.Format, spoolFormat)
	case st.Run == "" || st.Holder.PID <= 0 || st.Child.PID <= 0 || st.Control == "":
		return st, errors.New("read holder state: incomplete")
	}
	return st, nil
}

// writeState replaces the state file of dir with st, whole: written
// aside, then renamed over it.
func writeState(dir string, st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write holder state: %w", err)
	}
	// Windows refuses to replace a file while a reader has it open (flyd
	// reading it, a moment): try again a little later.

	for try := 0; ; try++ {
		if err = os.Rename(tmp, filepath.Join(dir, stateFile)); err == nil || try == renameTries {
			break
		}
		time.Sleep(renameWait)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write holder state: %w", err)
	}
	return nil
}

// How writeState retries a refused rename: about a second in all.
const (
	renameTries = 50
	renameWait  = 20 * time.Millisecond
)
