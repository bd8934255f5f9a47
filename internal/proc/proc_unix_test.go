//go:build unix

package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A group started with StartGroup is seen alive, its leader is the same
// process by its start time, and a Kill to the group ends the leader and
// what it started; then nothing of the group is left.
func TestGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 100000 & wait")
	if err := StartGroup(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("Getpgid(leader) = %d, %v; want its own group %d", pgid, err, pid)
	}
	if ok, err := GroupAlive(pid); !ok || err != nil {
		t.Fatalf("GroupAlive(a running group) = %v, %v", ok, err)
	}
	if ok, err := Alive(pid); !ok || err != nil {
		t.Fatalf("Alive(the leader) = %v, %v", ok, err)
	}
	start, err := StartTime(pid)
	if start == 0 || err != nil {
		t.Fatalf("StartTime(the leader) = %d, %v", start, err)
	}
	if again, _ := StartTime(pid); again != start {
		t.Fatalf("StartTime changed: %d, then %d", start, again)
	}
	if err := SignalGroup(pid, Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ok, _ := Alive(pid); ok {
		t.Errorf("Alive(a reaped leader) = true")
	}
	deadline := time.Now().Add(time.Minute) // a hang detector
	for {
		ok, err := GroupAlive(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d still alive a minute after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond) // a group's end sends this test no event: the interval of looking
	}
	if err := SignalGroup(pid, Terminate); err != nil {
		t.Errorf("SignalGroup(a group that is gone) = %v, want nil", err)
	}
	if err := SignalGroup(0, Kill); err == nil {
		t.Errorf("SignalGroup(0) = nil: it must never reach this process's own group")
	}
}

// StartDetached starts the child in a session of its own.
func TestStartDetached(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 100000")
	if err := StartDetached(cmd); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer SignalProcess(cmd.Process.Pid, Kill)
	if sid, err := unix.Getsid(cmd.Process.Pid); err != nil || sid != cmd.Process.Pid {
		t.Fatalf("Getsid(child) = %d, %v; want a session of its own", sid, err)
	}
}
