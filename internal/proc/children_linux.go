package proc

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

func subreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}

func children(zombies bool) []int {
	self := []byte(strconv.Itoa(os.Getpid()))
	var out []int
	eachProcess(func(pid int, name string) {
		if f := StatFields(name); len(f) > 1 && bytes.Equal(f[1], self) && (string(f[0]) == "Z") == zombies {
			out = append(out, pid)
		}
	})
	return out
}

func withEnv(kv string) []int {
	if kv == "" {
		return nil
	}
	mark := []byte(kv + "\x00")
	nulMark := append([]byte{0}, mark...)
	self := os.Getpid()
	var out []int
	eachProcess(func(pid int, name string) {
		if pid == self {
			return
		}
		b, err := os.ReadFile("/proc/" + name + "/environ")
		if err == nil && (bytes.HasPrefix(b, mark) || bytes.Contains(b, nulMark)) {
			out = append(out, pid)
		}
	})
	return out
}

// eachProcess calls fn with every process's pid, as a number and as its
// /proc name.
func eachProcess(fn func(pid int, name string)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			fn(pid, e.Name())
		}
	}
}
