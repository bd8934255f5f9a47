package dtd

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/wine"
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

// deadPID is the pid of a process that has ended: this test binary,
// run again with no test to run.
func deadPID(t *testing.T) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return cmd.Process.Pid
}

// TestRead: a DTD file is read only when it is a regular file of this
// user, not a symlink, bounded, with a loopback URI, an absolute root and
// a live process.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	live := os.Getpid()
	app, err := filepath.Abs(filepath.FromSlash("/home/u/app")) // on Windows, on this drive
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "epoch": 1, "pid": live, "dartVersion": "3.9", "workspaceRoot": app, "ideName": "VS Code"}
	write(t, dir, "100", good)
	write(t, dir, "101", map[string]any{"wsUri": "ws://10.1.2.3:5000/abc=", "pid": live, "workspaceRoot": app})
	write(t, dir, "102", map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "pid": deadPID(t), "workspaceRoot": app})
	write(t, dir, "103", map[string]any{"wsUri": "ws://127.0.0.1:5000/abc=", "pid": live, "workspaceRoot": "relative/app"})
	os.WriteFile(filepath.Join(dir, "104"), []byte(strings.Repeat(" ", maxFile+1)), 0o600)
	os.WriteFile(filepath.Join(dir, "105"), []byte("{not json"), 0o600)
	os.Mkdir(filepath.Join(dir, "108"), 0o700)
	write(t, dir, "notapid", good)

	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	in, err := Read(root, "100", owner.Current())
	if err != nil || in.WSURI != "ws://127.0.0.1:5000/abc=" || in.WorkspaceRoot != app || in.IDEName != "VS Code" || in.PID != live {
		t.Errorf("Read(good) = %+v, %v", in, err)
	}
	for name, want := range map[string]error{"102": ErrStale, "108": ErrNotRegular} {
		if _, err := Read(root, name, owner.Current()); !errors.Is(err, want) {
			t.Errorf("Read(%s) = %v, want %v", name, err, want)
		}
	}
	for _, name := range []string{"101", "103", "104", "105", "notapid", "missing"} {
		if in, err := Read(root, name, owner.Current()); err == nil {
			t.Errorf("Read(%s) = %+v, want an error", name, in)
		}
	}
	// Another user's file (this test cannot chown: it asks as another user).
	if _, err := Read(root, "100", anotherUser()); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Read(another user's) = %v, want ErrNotOwned", err)
	}

	t.Run("symlinks", func(t *testing.T) {
		wine.SkipUnder(t, "Wine 8's CreateSymbolicLink succeeds and makes no link")
		outside := filepath.Join(t.TempDir(), "real")
		b, _ := json.Marshal(good)
		os.WriteFile(outside, b, 0o600)
		for name, target := range map[string]string{
			"106": outside,
			"107": "100", // a symlink inside the directory is refused too
		} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Skipf("cannot make a symlink here: %v", err) // Windows, without the right to
			}
		}
		for _, name := range []string{"106", "107"} {
			if _, err := Read(root, name, owner.Current()); !errors.Is(err, ErrNotRegular) {
				t.Errorf("Read(%s) = %v, want %v", name, err, ErrNotRegular)
			}
		}
	})
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

// TestDir: where DTDs write their files, per OS (cli_util's
// BaseDirectories('Dart').stateHome), unless DART_DATA_HOME says.
func TestDir(t *testing.T) {
	home, local := filepath.FromSlash("/home/u"), filepath.FromSlash("/home/u/AppData/Local")
	env := map[string]string{"HOME": home, "LOCALAPPDATA": local}
	get := func(k string) string { return env[k] }
	want := map[string]string{
		"darwin":  filepath.Join(home, "Library", "Application Support", "Dart", "dtd"),
		"windows": filepath.Join(local, "Dart", "dtd"),
	}[runtime.GOOS]
	if want == "" {
		want = filepath.Join(home, ".local", "state", "Dart", "dtd")
	}
	if d := Dir(get); d != want {
		t.Errorf("Dir = %s, want %s", d, want)
	}
	env["DART_DATA_HOME"] = filepath.FromSlash("/data")
	if d, want := Dir(get), filepath.Join(env["DART_DATA_HOME"], "dtd"); d != want {
		t.Errorf("Dir with DART_DATA_HOME = %s, want %s", d, want)
	}
}
