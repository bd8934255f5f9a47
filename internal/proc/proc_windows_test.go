package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/fly-dev/fly/internal/wine"
)

// envRole makes the test binary a process of a test's tree instead: a
// "child" starts a "grandchild", prints both pids and waits to be ended;
// a "grandchild" waits to be ended; a "detacher" starts a grandchild with
// StartDetached, prints its pid and exits.
const envRole = "FLY_PROC_TEST_ROLE"

// envBreakaway makes the child ask for its grandchild to break away from
// the job; if that is refused, it prints "refused: " and why.
const envBreakaway = "FLY_PROC_TEST_BREAKAWAY"

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "child":
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		gc := exec.Command(self)
		gc.Env = append(os.Environ(), envRole+"=grandchild")
		if os.Getenv(envBreakaway) != "" {
			gc.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_BREAKAWAY_FROM_JOB}
		}
		if err := gc.Start(); err != nil {
			fmt.Printf("refused: %v\n", err)
			time.Sleep(time.Hour) // until the test ends it
		}
		fmt.Printf("%d %d\n", os.Getpid(), gc.Process.Pid)
		time.Sleep(time.Hour) // until the test ends it
		os.Exit(0)
	case "grandchild":
		time.Sleep(time.Hour) // until the test ends it
		os.Exit(0)
	case "detacher":
		self, err := os.Executable()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		d := exec.Command(self)
		d.Env = append(os.Environ(), envRole+"=grandchild")
		if err := StartDetached(d); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println(d.Process.Pid)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tree is `cmd /c` → child → grandchild, started by StartGroup.
type tree struct {
	cmd    *exec.Cmd
	leader int
	procs  map[string]windows.Handle // the leader, the child and the grandchild, open to wait for their end
}

func startTree(t *testing.T) *tree {
	t.Helper()
	tr, line := startTreeWith(t)
	if strings.HasPrefix(line, "refused") {
		t.Fatalf("the child could not start the grandchild: %s", line)
	}
	var child, grandchild int
	if _, err := fmt.Sscan(line, &child, &grandchild); err != nil {
		t.Fatalf("the tree's pids %q: %v", line, err)
	}
	for name, pid := range map[string]int{"child": child, "grandchild": grandchild} {
		h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
		if err != nil {
			t.Fatalf("open the %s, %d: %v", name, pid, err)
		}
		tr.procs[name] = h
	}
	return tr
}

// startTreeWith starts the tree with env added to the child's
// environment, and returns the child's line: the two pids, or why the
// grandchild did not start.
func startTreeWith(t *testing.T, env ...string) (*tree, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cmd", "/c", self)
	cmd.Env = append(append(os.Environ(), envRole+"=child"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := StartGroup(cmd); err != nil {
		t.Fatal(err)
	}
	tr := &tree{cmd: cmd, leader: cmd.Process.Pid, procs: make(map[string]windows.Handle)}
	if h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(tr.leader)); err == nil {
		tr.procs["leader"] = h
	} else {
		t.Errorf("open the leader, %d: %v", tr.leader, err)
	}
	t.Cleanup(func() {
		Release(tr.leader) // ends what a failed test left
		if h := tr.procs["leader"]; h == 0 || waitHandle(h) {
			cmd.Wait() // an error if the test waited already
		} else {
			t.Errorf("the leader outlived Release by a minute")
		}
		for _, h := range tr.procs {
			windows.CloseHandle(h)
		}
	})
	// The child prints its pid and its child's once both run: the read
	// waits for them.
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the tree's pids: %v", err)
	}
	return tr, strings.TrimSpace(line)
}

// waitEnded waits (a minute at most: a hang detector) for the processes
// of the tree to end, then for cmd.
func (tr *tree) waitEnded(t *testing.T, after string) {
	t.Helper()
	for name, h := range tr.procs {
		if !waitHandle(h) {
			t.Fatalf("the %s outlived %s by a minute", name, after)
		}
	}
	tr.cmd.Wait()
}

// waitHandle waits for a process to end, a minute at most (a hang
// detector), and reports whether it did.
func waitHandle(h windows.Handle) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(time.Minute/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// A tree started with StartGroup is one group: alive while it runs, its
// leader the same process by its start time; SignalGroup ends all of it,
// the grandchild too, and then nothing of it is left.
func TestGroupTree(t *testing.T) {
	tr := startTree(t)
	if ok, err := GroupAlive(tr.leader); !ok || err != nil {
		t.Fatalf("GroupAlive(a running tree) = %v, %v", ok, err)
	}
	if ok, err := Alive(tr.leader); !ok || err != nil {
		t.Fatalf("Alive(the leader) = %v, %v", ok, err)
	}
	start, err := StartTime(tr.leader)
	if start == 0 || err != nil {
		t.Fatalf("StartTime(the leader) = %d, %v", start, err)
	}
	if again, _ := StartTime(tr.leader); again != start {
		t.Fatalf("StartTime changed: %d, then %d", start, again)
	}
	if err := SignalGroup(tr.leader, Terminate); err != nil {
		t.Fatal(err)
	}
	tr.waitEnded(t, "SignalGroup")
	if ok, err := Alive(tr.leader); ok || err != nil {
		t.Errorf("Alive(an ended leader) = %v, %v; want false", ok, err)
	}
	if again, _ := StartTime(tr.leader); again != start {
		t.Errorf("StartTime(an ended leader, not released) = %d, want %d: its pid is still its own", again, start)
	}
	deadline := time.Now().Add(time.Minute) // a hang detector
	for {
		ok, err := GroupAlive(tr.leader)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d has active processes a minute after SignalGroup", tr.leader)
		}
		time.Sleep(10 * time.Millisecond) // the job's count sends this test no event: the interval of looking
	}
	if err := SignalGroup(tr.leader, Kill); err != nil {
		t.Errorf("SignalGroup(a group that is gone) = %v, want nil", err)
	}
	if err := SignalGroup(0, Kill); err == nil {
		t.Errorf("SignalGroup(0) = nil, want an error")
	}
}

// Release closes the job, which ends what is left in it: a flyd that is
// done with a run, or that dies, leaves none of its processes behind.
func TestReleaseEndsTheTree(t *testing.T) {
	tr := startTree(t)
	Release(tr.leader)
	tr.waitEnded(t, "Release")
	Release(tr.leader) // twice is nothing
}

// No process of a group can leave it: a grandchild started with
// CREATE_BREAKAWAY_FROM_JOB is refused.
func TestNoBreakaway(t *testing.T) {
	tr, line := startTreeWith(t, envBreakaway+"=1")
	if !strings.HasPrefix(line, "refused") {
		t.Errorf("a grandchild that asked to break away from the job started (%s)", line)
	}
	if err := SignalGroup(tr.leader, Kill); err != nil {
		t.Fatal(err)
	}
	tr.waitEnded(t, "SignalGroup")
}

// Alive and StartTime of processes that are not there.
func TestNoSuchProcess(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if ok, err := Alive(pid); ok || err != nil {
			t.Errorf("Alive(%d) = %v, %v; want false, nil", pid, ok, err)
		}
		if st, err := StartTime(pid); st != 0 || err != nil {
			t.Errorf("StartTime(%d) = %d, %v; want 0, nil", pid, st, err)
		}
	}
	if ok, err := Alive(os.Getpid()); !ok || err != nil {
		t.Errorf("Alive(this process) = %v, %v", ok, err)
	}
	if err := SignalProcess(0, Kill); err == nil {
		t.Errorf("SignalProcess(0) = nil, want an error")
	}
}

// StartDetached starts a process that runs with no console of its own
// and that SignalProcess ends.
func TestStartDetached(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envRole+"=grandchild")
	if err := StartDetached(cmd); err != nil {
		t.Fatal(err)
	}
	if f := cmd.SysProcAttr.CreationFlags; f&windows.DETACHED_PROCESS == 0 || f&windows.CREATE_NEW_PROCESS_GROUP == 0 {
		t.Errorf("creation flags %#x: want DETACHED_PROCESS and CREATE_NEW_PROCESS_GROUP", f)
	}
	pid := cmd.Process.Pid
	if ok, err := Alive(pid); !ok || err != nil {
		t.Errorf("Alive(a detached child) = %v, %v", ok, err)
	}
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	if err := SignalProcess(pid, Terminate); err != nil {
		t.Fatal(err)
	}
	if !waitHandle(h) {
		t.Fatalf("a detached child outlived SignalProcess by a minute")
	}
	if err := cmd.Wait(); err == nil {
		t.Errorf("Wait(a terminated child) = nil, want its exit code")
	}
}

// A detached child leaves its starter's job when the job allows it (the
// shim's flyd outlives the editor that closes its job), and when the job
// does not, it still starts, in the job.
func TestStartDetachedBreaksAway(t *testing.T) {
	for _, tc := range []struct {
		name      string
		breakaway bool
	}{{"job allows breakaway", true}, {"job forbids breakaway", false}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.breakaway {
				wine.SkipUnder(t, "Wine answers QueryInformationJobObject(JobObjectExtendedLimitInformation) with no limits, so a job's JOB_OBJECT_LIMIT_BREAKAWAY_OK cannot be seen")
			}
			job, err := windows.CreateJobObject(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
			info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
			if tc.breakaway {
				info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK
			}
			if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
				uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
				t.Fatal(err)
			}
			closed := false
			closeJob := func() {
				if !closed {
					closed = true
					windows.CloseHandle(job)
				}
			}
			defer closeJob()

			// The starter (the "detacher") runs in the job: started
			// suspended, assigned, resumed.
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			starter := exec.Command(self)
			starter.Env = append(os.Environ(), envRole+"=detacher")
			starter.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED}
			out, err := starter.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := starter.Start(); err != nil {
				t.Fatal(err)
			}
			h, err := assign(job, starter.Process.Pid)
			if err == nil {
				windows.CloseHandle(h)
				err = resume(starter.Process.Pid)
			}
			if err != nil {
				starter.Process.Kill()
				starter.Wait()
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			starter.Wait()
			var pid int
			if _, serr := fmt.Sscan(line, &pid); err != nil || serr != nil {
				t.Fatalf("the starter said %q (%v): want the detached child's pid", line, err)
			}
			d, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
			if err != nil {
				t.Fatal(err)
			}
			defer windows.CloseHandle(d)
			defer windows.TerminateProcess(d, 1)

			closeJob() // as an editor that exits: kill on close
			ev, err := windows.WaitForSingleObject(d, 0)
			if tc.breakaway {
				if err != nil || ev != uint32(windows.WAIT_TIMEOUT) {
					t.Errorf("the detached child ended with its starter's job, which allows breaking away (wait = %#x, %v)", ev, err)
				}
				return
			}
			if !waitHandle(d) {
				t.Errorf("the detached child outlived a job it could not leave")
			}
		})
	}
}
