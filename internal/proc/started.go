package proc

// A pid names a process only until that process ends and is freed: then
// the operating system may give it to another. A caller that recorded a
// pid with its start time (StartTime) and later means to signal that
// process signals it through these, which check the start time and
// signal as one step, so that the pid cannot change hands in between.

// SignalIfStarted sends sig to process pid only if it is still the
// process that started at start (StartTime's answer then): a pid of no
// process, or of another process now, is left alone and is not an
// error; so is any pid when start is 0 (unknown). On Windows one handle
// is opened, its start time read and the process ended through it; on
// Linux a pidfd is opened before the start time is read (kernels since
// 5.3), and the signal goes through it. macOS has no such handle: there
// the start time is read and the pid then signalled, and a process that
// ended and whose pid was given to another in between would be reached
// (best effort).
func SignalIfStarted(pid int, start uint64, sig Signal) error {
	return signalIfStarted(pid, start, sig)
}

// SignalGroupIfStarted sends sig to the group led by pgid, which
// StartGroup started at start, unless that group is known to be gone:
//   - while pgid is the process that started at start, the group is
//     signalled as SignalGroup does (held by a pidfd on Linux, a handle on
//     Windows, while it is checked); a pid that another process has now
//     is left alone (the recorded leader's group has ended: see below),
//     and so is a live pgid when start is 0 (unknown);
//   - once the leader has ended (no process has pid pgid), on Unix what
//     is left of its group is signalled by the group's id, which the
//     kernel gives no new process while the group has members; on
//     Windows a group with no job in this process is its leader alone
//     (see SignalGroup), and nothing is signalled.
//
// On Windows a group this process started or shares (its job) is
// signalled as SignalGroup does, whatever start says: its id names the
// job until Release.
func SignalGroupIfStarted(pgid int, start uint64, sig Signal) error {
	return signalGroupIfStarted(pgid, start, sig)
}
