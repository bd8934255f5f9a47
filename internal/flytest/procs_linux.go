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
