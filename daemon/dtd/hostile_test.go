//go:build unix

package dtd

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/owner"
)

// info is a DTD file's content naming pid.
func info(pid int) Info {
	return Info{WSURI: "ws://127.0.0.1:1/x=/ws", PID: pid, WorkspaceRoot: "/w"}
}

// TestReadRefusesAnotherUsersPid: a DTD file of the user that names a
// live process of another user (its pid reused after the DTD died) is
// stale, not followed to that user's DTD.
func TestReadRefusesAnotherUsersPid(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting a process of another user needs root")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process as uid 65534: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	dir := t.TempDir()
	name := strconv.Itoa(cmd.Process.Pid)
	write(t, dir, name, info(cmd.Process.Pid))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := Read(root, name, owner.Current()); !errors.Is(err, ErrStale) {
		t.Errorf("Read of a file naming another user's live process = %v, want ErrStale", err)
	}
	write(t, dir, "self", info(os.Getpid()))
	if _, err := Read(root, strconv.Itoa(os.Getpid()), owner.Current()); err != nil && errors.Is(err, ErrStale) {
		t.Errorf("Read of a file naming this process = %v, want it live", err)
	}
}

// TestDirOthersCanWriteRefused: a DTD directory that others can write
// is not watched, with the reason.
func TestDirOthersCanWriteRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dtd")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	w, err := Start(Config{Dir: dir, Served: func(string) (string, bool) { return "", false }})
	if err == nil {
		w.Close()
		t.Fatal("Start on a directory anyone can write succeeded, want a refusal")
	}
	if !strings.Contains(err.Error(), "written by others") {
		t.Errorf("Start = %v, want it to say others can write it", err)
	}
}

// TestCandidatesReadPastJunk: thousands of names that sort first (not
// pids, or pids of no live process) do not hide the real file, and the
// work per scan is bounded.
func TestCandidatesReadPastJunk(t *testing.T) {
	dir := t.TempDir()
	dead := deadPID(t)
	for i := range 10_000 {
		name := "0" + strconv.Itoa(i) // sorts first; not a pid as written
		if i%2 == 0 {
			name = strconv.Itoa(dead + 1 + i*7) // probably no process; never this one
			if name == strconv.Itoa(os.Getpid()) {
				continue
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	self := strconv.Itoa(os.Getpid())
	write(t, dir, self, info(os.Getpid()))
	w := &Watcher{cfg: Config{Dir: dir}, user: owner.Current()}
	w.cfg.Log = slog.New(slog.DiscardHandler)
	got := w.candidates()
	found := false
	for _, n := range got {
		found = found || n == self
	}
	if !found || len(got) > maxFiles {
		t.Errorf("candidates among 10,000 junk names = %d names, found the real one %v; want it, at most %d", len(got), found, maxFiles)
	}
}

// TestChangesCostTheirName: a file touched or rewritten in a loop, among
// thousands of junk names, costs a read of that file per change, never
// a scan of the directory; a DTD file written meanwhile is still found.
func TestChangesCostTheirName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dtd")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dir, "junk"+strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	found := make(chan struct{}, 1)
	w, err := Start(Config{Dir: dir, Rescan: time.Hour, Served: func(root string) (string, bool) {
		select {
		case found <- struct{}{}:
		default:
		}
		return root, false // nothing to follow: no DTD to dial
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(dir, "junk0"), []byte(strconv.Itoa(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, dir, strconv.Itoa(os.Getpid()), info(os.Getpid()))
	select {
	case <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("the DTD file written among the changes was never read")
	}
	if n := w.scans.Load(); n > 2 {
		t.Errorf("500 changes to one junk file made %d scans of the directory, want the first only", n)
	}
}
