//go:build unix

package proc

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// waitGroupGone waits (a minute at most: a hang detector) until nothing
// of the group pgid is left.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := GroupAlive(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d still alive a minute after SIGKILL", pgid)
		}
		time.Sleep(10 * time.Millisecond) // a group's end sends this test no event: the interval of looking
	}
}

// killed reports whether cmd ended by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// SignalIfStarted reaches a process only with its own start time: with
// another (its pid given to another process since) or none, it is left
// running.
func TestSignalIfStarted(t *testing.T) {
	cmd := exec.Command("sleep", "100000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	start, err := StartTime(pid)
	if err != nil || start == 0 {
		t.Fatalf("StartTime(a child) = %d, %v", start, err)
	}
	for _, other := range []uint64{start + 1, start - 1, 0} {
		if err := SignalIfStarted(pid, other, Kill); err != nil {
			t.Errorf("SignalIfStarted(pid, another start time %d) = %v, want nil", other, err)
		}
		if ok, _ := Alive(pid); !ok {
			t.Fatalf("SignalIfStarted(pid, start time %d, not %d) ended the process", other, start)
		}
	}
	if err := SignalIfStarted(pid, start, Kill); err != nil {
		t.Fatalf("SignalIfStarted(pid, its start time) = %v", err)
	}
	if err := cmd.Wait(); !killed(err) {
		t.Errorf("the process after SignalIfStarted(Kill) ended with %v, want SIGKILL", err)
	}
	if err := SignalIfStarted(pid, start, Kill); err != nil {
		t.Errorf("SignalIfStarted(a process that is gone) = %v, want nil", err)
	}
	if err := SignalIfStarted(0, start, Kill); err == nil {
		t.Errorf("SignalIfStarted(0) = nil, want an error")
	}
}

// SignalGroupIfStarted ends a group whose leader is the process that
// started then, and leaves it alone for another start time; once the
// leader has ended, what is left of its group is still ended.
func TestSignalGroupIfStarted(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 100000 & wait")
	if err := StartGroup(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { SignalGroup(pid, Kill); cmd.Wait() })
	start, err := StartTime(pid)
	if err != nil || start == 0 {
		t.Fatalf("StartTime(the leader) = %d, %v", start, err)
	}
	if err := SignalGroupIfStarted(pid, start+1, Kill); err != nil {
		t.Errorf("SignalGroupIfStarted(another start time) = %v, want nil", err)
	}
	if ok, _ := Alive(pid); !ok {
		t.Fatalf("SignalGroupIfStarted(another start time) ended the leader")
	}
	if err := SignalGroupIfStarted(pid, start, Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitGroupGone(t, pid)

	// The leader exits at once; its child stays in the group.
	cmd = exec.Command("/bin/sh", "-c", "sleep 100000 & exit 0")
	if err := StartGroup(cmd); err != nil {
		t.Fatal(err)
	}
	pid = cmd.Process.Pid
	t.Cleanup(func() { SignalGroup(pid, Kill) })
	if start, err = StartTime(pid); err != nil || start == 0 {
		t.Fatalf("StartTime(the leader) = %d, %v", start, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := GroupAlive(pid); !ok {
		t.Fatalf("the leader's child left the group, or ended")
	}
	if err := SignalGroupIfStarted(pid, start, Kill); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pid)
	if err := SignalGroupIfStarted(0, start, Kill); err == nil {
		t.Errorf("SignalGroupIfStarted(0) = nil: it must never reach this process's own group")
	}
}
