package runs

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// processStart identifies when process pid started (field 22 of
// /proc/PID/stat, in clock ticks since boot), so that a pid recorded
// before a crash is only signalled if it is still the same process.
// 0 means unknown.
func processStart(pid int) uint64 {
	fields := statFields(strconv.Itoa(pid))
	if len(fields) < 20 {
		return 0
	}
	n, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// statFields returns the fields of /proc/PID/stat after the command
// name (field 3, the state, first), or nil. The command name (field 2)
// may hold spaces and parentheses: fields are counted after its last ')'.
func statFields(pid string) [][]byte {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(b[i+1:])
}

// eachProcess calls fn with every process's pid, as a number and as its
// /proc name, until fn returns false.
func eachProcess(fn func(pid int, name string) bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && !fn(pid, e.Name()) {
			return
		}
	}
}

// groupAlive reports whether any process is left in the process group
// pgid (field 5 of /proc/PID/stat). Zombies do not count: they are gone
// but for their exit status.
func groupAlive(pgid int) bool {
	want := []byte(strconv.Itoa(pgid))
	alive := false
	eachProcess(func(_ int, name string) bool {
		f := statFields(name)
		alive = len(f) > 2 && string(f[0]) != "Z" && bytes.Equal(f[2], want)
		return !alive
	})
	return alive
}

// setSubreaper makes this process the child subreaper of its descendants.
func setSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// childProcesses lists this process's children: the zombies only, or
// the living only.
func childProcesses(zombies bool) []int {
	self := []byte(strconv.Itoa(os.Getpid()))
	var out []int
	eachProcess(func(pid int, name string) bool {
		if f := statFields(name); len(f) > 1 && bytes.Equal(f[1], self) && (string(f[0]) == "Z") == zombies {
			out = append(out, pid)
		}
		return true
	})
	return out
}

// markedProcesses lists the processes whose environment marks them as
// run id's. Only the user's own processes' environments are readable.
func markedProcesses(id string) []int {
	if id == "" {
		return nil
	}
	mark := []byte(EnvMarker + "=" + id + "\x00")
	var out []int
	eachProcess(func(pid int, name string) bool {
		if pid == os.Getpid() {
			return true
		}
		b, err := os.ReadFile("/proc/" + name + "/environ")
		if err == nil && (bytes.HasPrefix(b, mark) || bytes.Contains(b, append([]byte{0}, mark...))) {
			out = append(out, pid)
		}
		return true
	})
	return out
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	f := statFields(strconv.Itoa(pid))
	return len(f) > 0 && string(f[0]) == "Z"
}
