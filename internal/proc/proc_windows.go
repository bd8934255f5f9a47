package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// A group on Windows is a job object. StartGroup creates one that kills
// its processes when its last handle closes (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)
// and lets none of them break away, starts the child suspended, assigns
// it to the job and only then lets it run: everything the child starts
// is in the job from its first instruction. The job's handle is this
// process's alone (not inherited), so a process that dies (its handles
// closed by the system) takes its groups' processes with it; Release
// closes it, which ends whatever is left.
//
// Windows has no request to end that a process without a window
// receives, as SIGTERM is on Unix: Terminate and Kill both end the
// processes at once (TerminateJobObject, TerminateProcess). The graceful
// step is the caller's, before the signal (flutter's app.stop).

// exitKilled is the exit code of a process this package ends, as Go's
// os.Process.Kill gives on Windows.
const exitKilled = 1

// group is a job StartGroup made, and a handle to its leader: while it
// is open, Windows does not give the leader's pid to another process, so
// the pid keeps naming this group until Release.
type group struct {
	job    windows.Handle
	leader windows.Handle
}

// groups are the jobs StartGroup made, by their leader's pid. mu is held
// across every use of a handle, so Release never closes one in use.
var groups struct {
	mu sync.Mutex
	m  map[int]group
}

func startGroup(cmd *exec.Cmd) error {
	job, err := newJob()
	if err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	callerSuspends := cmd.SysProcAttr.CreationFlags&windows.CREATE_SUSPENDED != 0
	// CREATE_NO_WINDOW: a console program (cmd.exe for flutter.bat, dart)
	// started by a flyd without a console would open a console window
	// of its own on the user's desktop; this gives it one that is never
	// shown, which what it starts shares. Its output is in pipes anyway.
	// (Wine's host of that console holds the child's output pipes, and
	// lives while any process is attached to the console: there, a
	// descendant that keeps the console keeps the output open after the
	// leader's exit, as one that holds the pipes does everywhere. The
	// job's end ends it.)
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return err
	}
	pid := cmd.Process.Pid
	leader, err := assign(job, pid)
	if err == nil && !callerSuspends {
		err = resume(pid)
	}
	if err != nil {
		// The child never ran outside the job, and never ran at all
		// unless resume failed part way: end it, and wait for it, so
		// that nothing of it is left for the caller (who has an error,
		// not a process).
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if leader != 0 {
			windows.CloseHandle(leader)
		}
		windows.CloseHandle(job)
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.m == nil {
		groups.m = make(map[int]group)
	}
	groups.m[pid] = group{job: job, leader: leader}
	return nil
}

// newJob creates a job object whose processes end when its last handle
// closes, and from which none may break away.
func newJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("create job object: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("set the limits of a job object: %w", err)
	}
	return job, nil
}

// assign puts process pid into job, and returns a handle to the process
// (see group).
func assign(job windows.Handle, pid int) (windows.Handle, error) {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|
		windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return 0, fmt.Errorf("open process %d: %w", pid, err)
	}
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		windows.CloseHandle(h)
		return 0, fmt.Errorf("assign process %d to its job object: %w", pid, err)
	}
	return h, nil
}

// resume lets the threads of process pid, started suspended, run. Go's
// os/exec keeps no handle to the main thread: the threads are found in a
// snapshot of the system's.
func resume(pid int) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("resume process %d: snapshot threads: %w", pid, err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != uint32(pid) {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("resume process %d: open thread %d: %w", pid, te.ThreadID, err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("resume process %d: resume thread %d: %w", pid, te.ThreadID, err)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("resume process %d: list threads: %w", pid, err)
	}
	if resumed == 0 {
		return fmt.Errorf("resume process %d: it has no thread", pid)
	}
	return nil
}

// startDetached starts cmd with no console, in a process group of its
// own, hidden, and out of the starter's job if that job allows it: an
// editor that closes its job (and so kills the processes in it) does not
// take flyd with it. Breaking away from a job that does not allow it
// fails the start with "access denied"; and an exec.Cmd cannot be started
// again after a failed Start. So the job is asked first: when it does
// not allow breaking away, the child starts in it, and ends with it.
func startDetached(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.HideWindow = true
	cmd.SysProcAttr.CreationFlags |= windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP
	if mayBreakAway() {
		cmd.SysProcAttr.CreationFlags |= windows.CREATE_BREAKAWAY_FROM_JOB
	}
	return cmd.Start()
}

var isProcessInJob = windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")

// mayBreakAway reports whether this process is in a job that lets a
// child break away from it (JOB_OBJECT_LIMIT_BREAKAWAY_OK). Out of any
// job, or when it cannot be told, it is false: CREATE_BREAKAWAY_FROM_JOB
// is then either needless or a risk to the start.
func mayBreakAway() bool {
	if isProcessInJob.Find() != nil {
		return false
	}
	var in int32 // a BOOL
	if r, _, _ := isProcessInJob.Call(uintptr(windows.CurrentProcess()), 0, uintptr(unsafe.Pointer(&in))); r == 0 || in == 0 {
		return false
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	// A nil job is this process's own (its innermost, if jobs nest).
	if err := windows.QueryInformationJobObject(0, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return false
	}
	return info.BasicLimitInformation.LimitFlags&windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK != 0
}

func checkSignal(sig Signal) error {
	if sig != Terminate && sig != Kill {
		return fmt.Errorf("unknown signal %d", sig)
	}
	return nil
}

// signalGroup ends every process of pgid's job. A pgid with no job here
// (released, or started by another process) is its leader alone: only
// that process is ended, and the caller has made sure, by its start
// time, that it is still the same process.
func signalGroup(pgid int, sig Signal) error {
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
		return signalProcess(pgid, sig)
	}
	if err != nil {
		return fmt.Errorf("signal process group %d: terminate its job object: %w", pgid, err)
	}
	return nil
}

func signalProcess(pid int, sig Signal) error {
	if pid <= 0 {
		return fmt.Errorf("signal process %d: not a process", pid)
	}
	if err := checkSignal(sig); err != nil {
		return err
	}
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE, false, uint32(pid))
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return nil // no such process
	}
	if err != nil {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
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

// groupAlive counts the processes of pgid's job that have not exited. A
// pgid with no job here is its leader alone (see signalGroup).
func groupAlive(pgid int) (bool, error) {
	groups.mu.Lock()
	g, ok := groups.m[pgid]
	var info jobAccounting
	var err error
	if ok {
		err = windows.QueryInformationJobObject(g.job, windows.JobObjectBasicAccountingInformation,
			uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil)
	}
	groups.mu.Unlock()
	if !ok {
		return alive(pgid)
	}
	if err != nil {
		return false, fmt.Errorf("process group %d: query its job object: %w", pgid, err)
	}
	return info.ActiveProcesses > 0, nil
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// golang.org/x/sys/windows does not define.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// release closes pgid's job, which ends what is left in it, and the
// leader's handle, which frees its pid.
func release(pgid int) {
	groups.mu.Lock()
	g, ok := groups.m[pgid]
	delete(groups.m, pgid)
	groups.mu.Unlock()
	if ok {
		windows.CloseHandle(g.job)
		if g.leader != 0 {
			windows.CloseHandle(g.leader)
		}
	}
}

func alive(pid int) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	switch {
	case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
		return false, nil // no such process
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		return true, nil // a process, not this user's to look into: a pid names a process until it is freed
	case err != nil:
		return false, fmt.Errorf("process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		return false, fmt.Errorf("process %d: %w", pid, err)
	}
	return ev == uint32(windows.WAIT_TIMEOUT), nil
}

// startTime is the process's creation time, in 100 ns since 1601.
func startTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, nil
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return 0, nil // no such process
	}
	if err != nil {
		return 0, fmt.Errorf("process %d: read its start time: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, fmt.Errorf("process %d: read its start time: %w", pid, err)
	}
	return uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime), nil
}

func jobHandle(pgid int) uintptr {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	return uintptr(groups.m[pgid].job)
}

// shareGroup duplicates owner's handle job into this process and keeps
// it, with a handle to the leader, as the group pgid.
func shareGroup(pgid, owner int, job uintptr) error {
	if pgid <= 0 || owner <= 0 || job == 0 {
		return fmt.Errorf("share process group %d: no job to share", pgid)
	}
	op, err := windows.OpenProcess(windows.PROCESS_DUP_HANDLE, false, uint32(owner))
	if err != nil {
		return fmt.Errorf("share process group %d: open its owner %d: %w", pgid, owner, err)
	}
	defer windows.CloseHandle(op)
	var dup windows.Handle
	if err := windows.DuplicateHandle(op, windows.Handle(job), windows.CurrentProcess(), &dup, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		return fmt.Errorf("share process group %d: duplicate its job object: %w", pgid, err)
	}
	leader, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_TERMINATE, false, uint32(pgid))
	if err != nil {
		leader = 0 // it has ended: the job still holds what it left
	}
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.m == nil {
		groups.m = make(map[int]group)
	}
	if old, ok := groups.m[pgid]; ok {
		windows.CloseHandle(old.job)
		if old.leader != 0 {
			windows.CloseHandle(old.leader)
		}
	}
	groups.m[pgid] = group{job: dup, leader: leader}
	return nil
}
