//go:build unix

package fakeflutter

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests below run the fake as a real process: the steering that acts
// on the whole process cannot run in-process.

func startProcess(t *testing.T, vars []string, args ...string) (*exec.Cmd, *bufio.Reader, io.WriteCloser) {
	t.Helper()
	flutter, err := Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(flutter, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), append([]string{"FLY_TEST_HELPER=flutter"}, vars...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd, bufio.NewReader(stdout), stdin
}

// readUntil returns the stdout lines up to and including one with prefix.
func readUntil(t *testing.T, r *bufio.Reader, prefix string) []string {
	t.Helper()
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stdout ended before %q: %v; got:\n%s", prefix, err, strings.Join(lines, ""))
		}
		lines = append(lines, strings.TrimSuffix(l, "\n"))
		if strings.HasPrefix(l, prefix) {
			return lines
		}
	}
}

// alive reports whether pid is a live process (a zombie is dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

func TestProcessIgnoresSIGTERMAndGrandchildDiesWithGroup(t *testing.T) {
	cmd, stdout, _ := startProcess(t, []string{EnvIgnoreSIGTERM + "=1", EnvGrandchild + "=1", EnvTickMS + "=20"},
		"run", "--machine", "-d", "linux")
	lines := readUntil(t, stdout, `[{"event":"app.started"`)
	if m, ok := decode(lines[0]); !ok || m.Event != "daemon.connected" {
		t.Errorf("first line = %s", lines[0])
	}
	i := index(lines, func(l string) bool { return strings.HasPrefix(l, "grandchild pid ") })
	if i != 1 {
		t.Fatalf("no grandchild line right after daemon.connected:\n%s", strings.Join(lines, "\n"))
	}
	gpid, _ := strconv.Atoi(strings.TrimPrefix(lines[i], "grandchild pid "))
	if gpid <= 0 || !alive(gpid) {
		t.Fatalf("grandchild %d not running", gpid)
	}
	if pgid, err := syscall.Getpgid(gpid); err != nil || pgid != cmd.Process.Pid {
		t.Errorf("grandchild's group = %d (%v), want %d", pgid, err, cmd.Process.Pid)
	}

	waited := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, stdout)
		waited <- cmd.Wait()
	}()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-waited:
		t.Fatalf("fake exited on SIGTERM: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("fake survived SIGKILL")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(gpid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d outlived its group", gpid)
		}
		time.Sleep(10 * time.Millisecond) // a grandchild's end sends this test no event: the interval of looking
	}
}

func TestProcessCrashExitCode(t *testing.T) {
	cmd, stdout, _ := startProcess(t, []string{EnvCrashAfter + "=2", EnvTickMS + "=5"}, "run", "--machine")
	io.Copy(io.Discard, stdout)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != CrashExitCode {
		t.Errorf("wait = %v, want exit status %d", err, CrashExitCode)
	}
}

// app.stop ends a real process promptly even though its stdin (a
// blocking pipe) cannot be interrupted.
func TestProcessStopExits(t *testing.T) {
	cmd, stdout, stdin := startProcess(t, []string{EnvAppID + "=" + testAppID}, "run", "--machine")
	readUntil(t, stdout, `[{"event":"app.started"`)
	io.WriteString(stdin, `[{"id":1,"method":"app.stop","params":{"appId":"`+testAppID+`"}}]`+"\n")
	lines := readUntil(t, stdout, `[{"id":1,`)
	if lines[len(lines)-1] != `[{"id":1,"result":true}]` {
		t.Errorf("app.stop reply = %s", lines[len(lines)-1])
	}
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fake did not exit after app.stop")
	}
}

func TestProcessBuildWithGrandchild(t *testing.T) {
	cmd, stdout, _ := startProcess(t, []string{EnvGrandchild + "=1", EnvStartupMS + "=5000"}, "build", "apk")
	lines := readUntil(t, stdout, "grandchild pid ")
	gpid, _ := strconv.Atoi(strings.TrimPrefix(lines[len(lines)-1], "grandchild pid "))
	// Cancel mid-build: kill the group.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(gpid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d outlived its group", gpid)
		}
		time.Sleep(10 * time.Millisecond) // a grandchild's end sends this test no event: the interval of looking
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, "build/app/outputs/flutter-apk/app-release.apk")); err == nil {
		t.Errorf("a cancelled build left its artifact")
	}
}
