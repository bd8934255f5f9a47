package proc

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
)

// signalIfStarted opens one handle to process pid, compares its creation
// time with start and ends the process through that handle: while the
// handle is open, Windows gives the pid to no other process.
func signalIfStarted(pid int, start uint64, sig Signal) error {
	if pid <= 0 {
		return fmt.Errorf("signal process %d: not a process", pid)
	}
	if err := checkSignal(sig); err != nil {
		return err
	}
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return nil // no such process
	}
	if err != nil {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return fmt.Errorf("signal process %d: read its start time: %w", pid, err)
	}
	if start == 0 || uint64(created.HighDateTime)<<32|uint64(created.LowDateTime) != start {
		return nil // another process has the pid now
	}
	if err := windows.TerminateProcess(h, exitKilled); err != nil {
		// Terminating a process that has exited (and is still held
		// open somewhere) is "access denied".
		if ev, werr := windows.WaitForSingleObject(h, 0); werr == nil && ev == windows.WAIT_OBJECT_0 {
			return nil
		}
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}

// signalGroupIfStarted ends pgid's job if this process has it (see
// SignalGroupIfStarted); else the group is its leader alone, ended only
// if it is still the process that started at start.
func signalGroupIfStarted(pgid int, start uint64, sig Signal) error {
	if pgid <= 0 {
		return fmt.Errorf("signal process group %d: not a group", pgid)
	}
	if err := checkSignal(sig); err != nil {
		return err
	}
	groups.mu.Lock()
	g, ok := groups.m[pgid]
	var err error
	if ok {
		err = windows.TerminateJobObject(g.job, exitKilled)
	}
	groups.mu.Unlock()
	if !ok {
		return signalIfStarted(pgid, start, sig)
	}
	if err != nil {
		return fmt.Errorf("signal process group %d: terminate its job object: %w", pgid, err)
	}
	return nil
}
