package runs

import (
	"bytes"
	"os"
	"strconv"
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
