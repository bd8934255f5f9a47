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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return 0
	}
	n, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// groupAlive reports whether any process is left in the process group
// pgid (field 5 of /proc/PID/stat). Zombies count: they are gone but for
// their exit status.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) > 2 && string(fields[0]) != "Z" && bytes.Equal(fields[2], want) {
			return true
		}
	}
	return false
}

// setSubreaper makes this process the child subreaper of its descendants.
func setSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// childProcesses lists this process's children: the zombies only, or
// the living only.
func childProcesses(zombies bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) > 1 && bytes.Equal(fields[1], self) && (string(fields[0]) == "Z") == zombies {
			out = append(out, pid)
		}
	}
	return out
}

// markedProcesses lists the processes whose environment marks them as
// run id's. Only the user's own processes' environments are readable.
func markedProcesses(id string) []int {
	if id == "" {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := []byte(EnvMarker + "=" + id + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(b, mark) || bytes.Contains(b, append([]byte{0}, mark...)) {
			out = append(out, pid)
		}
	}
	return out
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] == 'Z'
}
