package proc

import (
	"bytes"
	"os"
	"strconv"
)

// The state of a process, from /proc/PID/stat.

// startTime is field 22 of /proc/PID/stat: clock ticks since boot.
func startTime(pid int) (uint64, error) {
	fields := StatFields(strconv.Itoa(pid))
	if len(fields) < 20 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, nil
	}
	return n, nil
}

func alive(pid int) (bool, error) {
	f := StatFields(strconv.Itoa(pid))
	return pid > 0 && len(f) > 0 && string(f[0]) != "Z", nil
}

// groupAlive looks for a process whose field 5 (the process group) is
// pgid and that is not a zombie.
func groupAlive(pgid int) (bool, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if f := StatFields(e.Name()); len(f) > 2 && string(f[0]) != "Z" && bytes.Equal(f[2], want) {
			return true, nil
		}
	}
	return false, nil
}

// StatFields returns the fields of /proc/PID/stat after the command
// name (field 3, the state, first), or nil. The command name (field 2)
// may hold spaces and parentheses: fields are counted after its last ')'.
// Linux only: daemon/runs' reaper reads it too.
func StatFields(pid string) [][]byte {
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
