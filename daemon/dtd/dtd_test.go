package dtd

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/owner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// deadPID is the pid of a process that has ended.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestRead: a DTD file is read only when it is a regular file of this
// user, not a symlink, bounded, with a loopback URI, an absolute root and
// a live process.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	live := os.Getpid()
	good := map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "epoch": 1, "pid": live, "dartVersion": "3.9", "workspaceRoot": "/home/u/app", "ideName": "VS Code"}
	write(t, dir, "100", good)
	write(t, dir, "101", map[string]any{"wsUri": "ws://10.1.2.3:5000/abc=", "pid": live, "workspaceRoot": "/home/u/app"})
	write(t, dir, "102", map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "pid": deadPID(t), "workspaceRoot": "/home/u/app"})
	write(t, dir, "103", map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "pid": live, "workspaceRoot": "relative/app"})
	os.WriteFile(filepath.Join(dir, "104"), []byte(strings.Repeat(" ", maxFile+1)), 0o600)
	os.WriteFile(filepath.Join(dir, "105"), []byte("{not json"), 0o600)
	outside := filepath.Join(t.TempDir(), "real")
	b, _ := json.Marshal(good)
	os.WriteFile(outside, b, 0o600)
	os.Symlink(outside, filepath.Join(dir, "106"))
	os.Symlink("100", filepath.Join(dir, "107")) // a symlink inside the directory is refused too
	os.Mkdir(filepath.Join(dir, "108"), 0o700)
	write(t, dir, "notapid", good)

	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	in, err := Read(root, "100", owner.Current())
	if err != nil || in.WSURI != "ws://127.0.0.1:5000/abc=" || in.WorkspaceRoot != "/home/u/app" || in.IDEName != "VS Code" || in.PID != live {
		t.Errorf("Read(good) = %+v, %v", in, err)
	}
	for name, want := range map[string]error{"102": ErrStale, "106": ErrNotRegular, "107": ErrNotRegular, "108": ErrNotRegular} {
		if _, err := Read(root, name, owner.Current()); !errors.Is(err, want) {
			t.Errorf("Read(%s) = %v, want %v", name, err, want)
		}
	}
	for _, name := range []string{"101", "103", "104", "105", "notapid", "missing"} {
		if in, err := Read(root, name, owner.Current()); err == nil {
			t.Errorf("Read(%s) = %+v, want an error", name, in)
		}
	}
	// Another user's file (this test cannot chown: it asks as another uid).
	if _, err := Read(root, "100", anotherUser()); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Read(another user's) = %v, want ErrNotOwned", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"wsUri":"ws://127.0.0.1:1/x=","pid":1,"workspaceRoot":"/a"}`))
	f.Add([]byte(`{"wsUri":"http://[::1]:1/x=/","pid":` + strconv.Itoa(os.Getpid()) + `,"workspaceRoot":"/a","ideName":"\xff"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "1"), data, 0o600)
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		in, err := Read(root, "1", owner.Current())
		if err == nil && (!filepath.IsAbs(in.WorkspaceRoot) || len(in.IDEName) > 64*4) {
			t.Fatalf("accepted %+v", in)
		}
	})
}

func TestDir(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d := Dir(get); d != "/home/u/.local/state/Dart/dtd" && d != "/home/u/Library/Application Support/Dart/dtd" {
		t.Errorf("Dir = %s", d)
	}
	env["DART_DATA_HOME"] = "/data"
	if d := Dir(get); d != "/data/dtd" {
		t.Errorf("Dir with DART_DATA_HOME = %s", d)
	}
}
