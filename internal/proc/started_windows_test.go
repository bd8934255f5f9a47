package proc

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/windows"
)

// startLone starts a process of the test's (a grandchild: it waits to be
// ended) that is in no job of this process's: a process a flyd that
// died started. It returns its pid, its start time and a handle to wait
// for its end.
func startLone(t *testing.T) (int, uint64, windows.Handle) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envRole+"=grandchild")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		windows.CloseHandle(h)
	})
	start, err := StartTime(pid)
	if err != nil || start == 0 {
		t.Fatalf("StartTime(a child) = %d, %v", start, err)
	}
	return pid, start, h
}

// ended reports whether the process of h has ended, without waiting.
func ended(h windows.Handle) bool {
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// SignalIfStarted and SignalGroupIfStarted (for a pid with no job here)
// end a process only with its own start time: with another (its pid
// given to another process since) or none, it runs on.
func TestSignalIfStarted(t *testing.T) {
	for _, signal := range []struct {
		name string
		f    func(int, uint64, Signal) error
	}{{"SignalIfStarted", SignalIfStarted}, {"SignalGroupIfStarted", SignalGroupIfStarted}} {
		t.Run(signal.name, func(t *testing.T) {
			pid, start, h := startLone(t)
			for _, other := range []uint64{start + 1, start - 1, 0} {
				if err := signal.f(pid, other, Kill); err != nil {
					t.Errorf("%s(pid, another start time %d) = %v, want nil", signal.name, other, err)
				}
				if ended(h) {
					t.Fatalf("%s(pid, start time %d, not %d) ended the process", signal.name, other, start)
				}
			}
			if err := signal.f(pid, start, Kill); err != nil {
				t.Fatalf("%s(pid, its start time) = %v", signal.name, err)
			}
			if !waitHandle(h) {
				t.Fatalf("the process outlived %s(pid, its start time) by a minute", signal.name)
			}
			if err := signal.f(pid, start, Kill); err != nil {
				t.Errorf("%s(a process that has ended) = %v, want nil", signal.name, err)
			}
			if err := signal.f(0, start, Kill); err == nil {
				t.Errorf("%s(0) = nil, want an error", signal.name)
			}
		})
	}
}

// A group this process started is its job: SignalGroupIfStarted ends all
// of it, the grandchild too.
func TestSignalGroupIfStartedJob(t *testing.T) {
	tr := startTree(t)
	start, err := StartTime(tr.leader)
	if err != nil || start == 0 {
		t.Fatalf("StartTime(the leader) = %d, %v", start, err)
	}
	if err := SignalGroupIfStarted(tr.leader, start, Kill); err != nil {
		t.Fatal(err)
	}
	tr.waitEnded(t, "SignalGroupIfStarted")
}
