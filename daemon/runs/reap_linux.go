package runs

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/fly-dev/fly/internal/proc"
	"golang.org/x/sys/unix"
)

// adoptOrphans makes this process the child subreaper of its
// descendants, then calls reap at once and whenever a child exits
// (SIGCHLD), until ctx ends.
func adoptOrphans(ctx context.Context, reap func()) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for {
		reap()
		select {
		case <-ctx.Done():
			return nil
		case <-sig:
		}
	}
}

// childProcesses lists this process's children: the zombies only, or
// the living only.
func childProcesses(zombies bool) []int {
	self := []byte(strconv.Itoa(os.Getpid()))
	var out []int
	eachProcess(func(pid int, name string) bool {
		if f := proc.StatFields(name); len(f) > 1 && bytes.Equal(f[1], self) && (string(f[0]) == "Z") == zombies {
			out = append(out, pid)
		}
		return true
	})
	return out
}

// markedProcesses lists the processes whose environment marks them as
// run id's. Only the user's own processes' environments are readable.
func markedProcesses(id string) ([]int, error) {
	if id == "" {
		return nil, nil
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
	return out, nil
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
