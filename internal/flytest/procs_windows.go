package flytest

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/wine"
	"golang.org/x/sys/windows"
)

// flydsOf finds no processes on Windows: the Env's cleanup stops only
// the flyd that holds its lock.
func flydsOf(string) []int { return nil }

// descendants names the processes under pid (pid itself first), as
// "pid name", for a failed test's report: what a run's process started.
func descendants(pid int) []string {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return []string{err.Error()}
	}
	defer windows.CloseHandle(snap)
	parent := map[int]int{}
	name := map[int]string{}
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		parent[int(pe.ProcessID)] = int(pe.ParentProcessID)
		name[int(pe.ProcessID)] = windows.UTF16ToString(pe.ExeFile[:])
	}
	return tree(pid, parent, name)
}

// startHung reports whether Wine left a run's fake flutter unstarted:
// the run's process is the cmd.exe that flutter.bat runs in, alive, and
// nothing under it is the fake's program. Wine 8 now and then fails a
// process start (see .ci/wine/gotest); this is the start that never
// returned. Windows does not do this; a fake flutter that started and
// printed nothing is not this.
func startHung(procs []string) bool {
	if !wine.Detected() || len(procs) == 0 || !strings.HasSuffix(procs[0], " cmd.exe") {
		return false
	}
	return !slices.ContainsFunc(procs, func(p string) bool { return strings.HasSuffix(p, " "+fakeflutter.WindowsExe) })
}
