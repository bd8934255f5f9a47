package flytest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// flydsOf returns the pids of the flyd processes whose environment names
// stateDir as FLY_STATE_DIR: those of one Env, however they were started
// (by the test, or by a shim on its own).
func flydsOf(stateDir string) []int {
	want := []byte("FLY_STATE_DIR=" + stateDir)
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(exe) != "flyd" {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// descendants names the processes under pid (pid itself first), as
// "pid name", for a failed test's report: what a run's process started.
func descendants(pid int) []string {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	name := map[int]string{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:]) // state, ppid, …
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(string(f[1]))
		parent[p] = pp
		name[p] = string(b[bytes.IndexByte(b, '(')+1 : i])
	}
	return tree(pid, parent, name)
}

// startHung: only Wine leaves a process start hanging (procs_windows.go).
func startHung([]string) bool { return false }
