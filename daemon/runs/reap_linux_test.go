package runs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/store"
)

// livePID reports whether pid is a process that is neither gone nor a
// zombie.
func livePID(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// TestStopReachesWhatLeftTheGroup: a command whose child started a new
// session (setsid) is stopped with it: the child carries the run's mark.
func TestStopReachesWhatLeftTheGroup(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped")
	r, err := e.Start(context.Background(), Spec{Kind: store.KindTool, Root: dir, Env: fakeEnv(), Command: "/bin/sh",
		Args: []string{"-c", `setsid sh -c 'echo $$ > "$0"; exec sleep 100000' "$0" & exec sleep 100000`, pidFile}})
	if err != nil {
		t.Fatal(err)
	}
	escaped := readPID(t, pidFile)
	pgid, _ := syscall.Getpgid(escaped)
	if pgid == r.Record().PID {
		t.Fatalf("the child did not leave the group (pgid %d)", pgid)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang detector
	for livePID(escaped) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d, which left run %s's group, outlived its stop", escaped, r.ID())
		}
		time.Sleep(10 * time.Millisecond) // a process's end sends this test no event: the interval of looking
	}
}
