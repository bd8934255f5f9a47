package proc

import (
	"fmt"
	"os/exec"
)

// Process groups on Windows (a job object that holds a run's whole tree,
// CREATE_NEW_PROCESS_GROUP, a detached start) are the next issue's work:
// until then each function here refuses with an error that says what is
// missing, rather than starting a child it could not stop.

func startGroup(cmd *exec.Cmd) error {
	return fmt.Errorf("start %s: starting a process in a group of its own is %w (Windows)", cmd.Path, ErrUnsupported)
}

func startDetached(cmd *exec.Cmd) error {
	return fmt.Errorf("start %s: starting a detached process is %w (Windows)", cmd.Path, ErrUnsupported)
}

func signalGroup(pgid int, _ Signal) error {
	return fmt.Errorf("signal process group %d: signalling a process group is %w (Windows)", pgid, ErrUnsupported)
}

func signalProcess(pid int, _ Signal) error {
	return fmt.Errorf("signal process %d: signalling a process is %w (Windows)", pid, ErrUnsupported)
}

func groupAlive(pgid int) (bool, error) {
	return false, fmt.Errorf("process group %d: telling whether a process group is alive is %w (Windows)", pgid, ErrUnsupported)
}

func alive(pid int) (bool, error) {
	return false, fmt.Errorf("process %d: telling whether a process is alive is %w (Windows)", pid, ErrUnsupported)
}

func startTime(pid int) (uint64, error) {
	return 0, fmt.Errorf("process %d: reading a process's start time is %w (Windows)", pid, ErrUnsupported)
}
