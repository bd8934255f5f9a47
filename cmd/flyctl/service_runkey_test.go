package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/fly-dev/fly/internal/paths"
)

// This file tests flyctl service on Windows (the Run key platform) on any
// OS, with a fake registry key and a fake flyd; the real registry and a
// real flyd are service_runkey_windows_test.go's.

// fakeRunKey is a registry key in memory.
type fakeRunKey struct {
	values map[string]string
	off    map[string]bool // turned off in Task Manager
}

func (k *fakeRunKey) get(name string) (string, error) {
	v, ok := k.values[name]
	if !ok {
		return "", fmt.Errorf("read the value %s: %w", name, fs.ErrNotExist)
	}
	return v, nil
}

func (k *fakeRunKey) set(name, command string) error { k.values[name] = command; return nil }
func (k *fakeRunKey) remove(name string) error       { delete(k.values, name); return nil }
func (k *fakeRunKey) disabled(name string) (bool, error) {
	return k.off[name], nil
}

// fakeFlyd is the flyd that startFlyd starts, endFlyd ends and ping finds.
type fakeFlyd struct {
	pid     int // 0: none runs
	nextPID int
	starts  [][]string // the argv of each start
	env     []string   // the last start's environment
	log     string     // the last start's log
	ended   []int      // the pids ended
}

// runKeySvcTest is a svcTest for the Run key platform, whatever OS the test
// runs on: its state directory is dir/local/fly on Linux and Windows.
type runKeySvcTest struct {
	*svcTest
	key  *fakeRunKey
	fly  *fakeFlyd
	log  string // flyd.log in the state directory
	file string // the Run key value, as messages name it
}

func newRunKeySvcTest(t *testing.T) *runKeySvcTest {
	t.Helper()
	s := &runKeySvcTest{
		svcTest: newSvcTest(t, "windows"),
		key:     &fakeRunKey{values: map[string]string{}, off: map[string]bool{}},
		fly:     &fakeFlyd{nextPID: 4000},
	}
	local := filepath.Join(filepath.Dir(s.home), "local")
	s.env["LOCALAPPDATA"], s.env["XDG_STATE_HOME"] = local, local
	s.env["USERPROFILE"] = s.home
	p, err := paths.Resolve(s.getenv)
	if err != nil {
		t.Fatal(err)
	}
	s.log = p.Log()
	s.file = `HKCU\Software\Microsoft\Windows\CurrentVersion\Run\fly`
	s.runKey = s.key
	s.connect = s.connectSystem
	s.ping = func(context.Context) (int, error) {
		if s.fly.pid == 0 {
			return 0, errors.New("no daemon")
		}
		return s.fly.pid, nil
	}
	s.startFlyd = func(argv, env []string, log string) error {
		s.fly.nextPID++
		s.fly.pid = s.fly.nextPID
		s.fly.starts = append(s.fly.starts, argv)
		s.fly.env, s.fly.log = env, log
		return nil
	}
	s.endFlyd = func(_ context.Context, _ func(string) string, pid int) error {
		if pid != s.fly.pid {
			t.Errorf("endFlyd(%d), want the pid that answers, %d", pid, s.fly.pid)
		}
		s.fly.ended = append(s.fly.ended, pid)
		s.fly.pid = 0
		return nil
	}
	return s
}

// wantCommand is the Run value's command line for flyd.
func wantCommand(flyd string) string { return `"` + flyd + `" run --no-console` }

func (s *runKeySvcTest) status(t *testing.T) serviceStatus {
	t.Helper()
	if code := s.exec(t, "status", "--json"); code != 0 {
		t.Fatalf("status --json exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	var st serviceStatus
	if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, &s.stdout)
	}
	return st
}

func TestServiceRunKeyDryRun(t *testing.T) {
	s := newRunKeySvcTest(t)
	if code := s.exec(t, "install", "--dry-run"); code != 0 {
		t.Fatalf("install --dry-run exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	if got, want := s.stdout.String(), wantCommand(s.flyd)+"\n"; got != want {
		t.Errorf("install --dry-run prints %q, want %q", got, want)
	}
	if !strings.Contains(s.stderr.String(), "would write "+s.file) {
		t.Errorf("install --dry-run stderr = %q, want the Run key value %s", &s.stderr, s.file)
	}
	if len(s.key.values) != 0 || s.fly.starts != nil {
		t.Errorf("install --dry-run wrote %v and started %v", s.key.values, s.fly.starts)
	}
}

func TestServiceRunKeyLifecycle(t *testing.T) {
	s := newRunKeySvcTest(t)
	if code := s.exec(t, "start"); code != 1 || !strings.Contains(s.stderr.String(), "install it with: flyctl service install") {
		t.Errorf("start before install exits %d with %q, want 1 with a hint", code, &s.stderr)
	}
	if st := s.status(t); st.Installed || st.State != "not installed" || st.Manager != "Run key" || st.Unit != s.file || st.Log != s.log {
		t.Errorf("status --json before install = %+v", st)
	}

	if code := s.exec(t, "install"); code != 0 {
		t.Fatalf("install exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	if got := s.key.values["fly"]; got != wantCommand(s.flyd) {
		t.Errorf("install wrote the Run value %q, want %q", got, wantCommand(s.flyd))
	}
	if want := [][]string{{s.flyd, "run", "--no-console"}}; !slices.EqualFunc(s.fly.starts, want, slices.Equal) || s.fly.log != s.log {
		t.Errorf("install started %q logging to %s, want %q logging to %s", s.fly.starts, s.fly.log, want, s.log)
	}
	if !slices.Contains(s.fly.env, "FLUTTER_ROOT="+s.env["FLUTTER_ROOT"]) {
		t.Errorf("install started flyd without flyctl's environment: %q", s.fly.env)
	}
	for _, w := range []string{"installed " + s.file, "started flyd; it starts at every login"} {
		if !strings.Contains(s.stdout.String(), w) {
			t.Errorf("install printed %q, want %q", &s.stdout, w)
		}
	}
	if s.stderr.Len() != 0 {
		t.Errorf("install warned %q, want nothing", &s.stderr)
	}

	st := s.status(t)
	if !st.Installed || st.State != "running" || !st.Running || st.PID != s.fly.pid || st.Command != wantCommand(s.flyd) ||
		st.Flyd != s.flyd || !slices.Equal(st.Args, []string{"run", "--no-console"}) || st.Path != "" || st.Log != s.log || len(st.Warnings) != 0 {
		t.Errorf("status --json after install = %+v", st)
	}
	if code := s.exec(t, "status"); code != 0 || s.stderr.Len() != 0 {
		t.Errorf("status exits %d with stderr %q, want 0 and no warnings", code, &s.stderr)
	}
	for _, w := range []string{
		fmt.Sprintf("flyd service: running (pid %d)\n", s.fly.pid),
		"unit:  " + s.file + " (Run key)\n",
		"runs:  " + wantCommand(s.flyd) + "\n",
		"at logon",
		"logs:  " + s.log + "\n",
	} {
		if !strings.Contains(s.stdout.String(), w) {
			t.Errorf("status does not print %q:\n%s", w, &s.stdout)
		}
	}
	if strings.Contains(s.stdout.String(), "PATH:") {
		t.Errorf("status prints a PATH, which a Run value does not hold:\n%s", &s.stdout)
	}

	pid := s.fly.pid
	steps := []struct {
		args   []string
		starts int   // how many starts it makes
		ended  []int // what it ends
		out    string
	}{
		{[]string{"start"}, 0, nil, "already running"},
		{[]string{"stop"}, 0, []int{pid}, "stopped flyd"},
		{[]string{"stop"}, 0, nil, "not running"},
		{[]string{"restart"}, 1, nil, "started flyd"},
		{[]string{"restart"}, 1, []int{pid + 1}, "restarted flyd"},
		{[]string{"uninstall"}, 0, []int{pid + 2}, "removed " + s.file},
	}
	for _, st := range steps {
		starts := len(s.fly.starts)
		s.fly.ended = nil
		if code := s.exec(t, st.args...); code != 0 {
			t.Fatalf("%v exits %d, want 0; stderr:\n%s", st.args, code, &s.stderr)
		}
		if n := len(s.fly.starts) - starts; n != st.starts || !slices.Equal(s.fly.ended, st.ended) {
			t.Errorf("%v started flyd %d times and ended %v, want %d and %v", st.args, n, s.fly.ended, st.starts, st.ended)
		}
		if !strings.Contains(s.stdout.String(), st.out) {
			t.Errorf("%v printed %q, want %q", st.args, &s.stdout, st.out)
		}
	}
	if _, ok := s.key.values["fly"]; ok || s.fly.pid != 0 {
		t.Errorf("uninstall left the Run value (%v) or flyd running (pid %d)", ok, s.fly.pid)
	}
	if code := s.exec(t, "uninstall"); code != 0 || !strings.Contains(s.stderr.String(), "nothing to do") {
		t.Errorf("uninstall again exits %d with %q, want 0, nothing to do", code, &s.stderr)
	}
}

// TestServiceRunKeyAlreadyRunning: a flyd the shim started is as good as
// the Run key's: install leaves it running, start finds it.
func TestServiceRunKeyAlreadyRunning(t *testing.T) {
	s := newRunKeySvcTest(t)
	s.fly.pid = 77
	if code := s.exec(t, "install"); code != 0 {
		t.Fatalf("install with a flyd running exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	if !strings.Contains(s.stdout.String(), "flyd is already running; it starts at every login from now on") || s.fly.starts != nil || s.fly.ended != nil {
		t.Errorf("install with a flyd running printed %q, started %v and ended %v; want it left running", &s.stdout, s.fly.starts, s.fly.ended)
	}
	if code := s.exec(t, "start"); code != 0 || !strings.Contains(s.stdout.String(), "already running") {
		t.Errorf("start with a flyd running exits %d and prints %q, want already running", code, &s.stdout)
	}
}

func TestServiceRunKeyForce(t *testing.T) {
	s := newRunKeySvcTest(t)
	old := `"C:\old\flyd.exe" run`
	s.key.values["fly"] = old
	s.fly.pid = 50
	if code := s.exec(t, "install"); code != 1 || !strings.Contains(s.stderr.String(), "flyctl service install --force") {
		t.Errorf("install over a Run value exits %d with %q, want 1 and a hint to use --force", code, &s.stderr)
	}
	if s.key.values["fly"] != old || s.fly.ended != nil || s.fly.starts != nil {
		t.Errorf("install without --force changed the value to %q, ended %v, started %v", s.key.values["fly"], s.fly.ended, s.fly.starts)
	}
	if code := s.exec(t, "install", "--force"); code != 0 {
		t.Fatalf("install --force exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	if s.key.values["fly"] != wantCommand(s.flyd) || !slices.Equal(s.fly.ended, []int{50}) || len(s.fly.starts) != 1 {
		t.Errorf("install --force wrote %q, ended %v, started %v; want the new value and flyd restarted", s.key.values["fly"], s.fly.ended, s.fly.starts)
	}
	if !strings.Contains(s.stdout.String(), "restarted flyd with the new unit") {
		t.Errorf("install --force printed %q", &s.stdout)
	}
}

// TestServiceRunKeyStatusDrift: a Run value that runs a flyd that is gone,
// and that Task Manager turned off, is warned about; PATH is not (a Run
// value holds none).
func TestServiceRunKeyStatusDrift(t *testing.T) {
	s := newRunKeySvcTest(t)
	gone := filepath.Join(t.TempDir(), "old", flydExe)
	s.key.values["fly"] = wantCommand(gone)
	s.key.off["fly"] = true
	st := s.status(t)
	if st.State != "stopped" || st.Flyd != gone || st.PID != 0 {
		t.Errorf("status --json = %+v, want stopped, running %s", st, gone)
	}
	want := []string{"the service runs " + gone + ", which is gone; this flyctl is next to " + s.flyd, "Task Manager's startup apps"}
	if len(st.Warnings) != len(want) {
		t.Errorf("status --json warns %q, want %d warnings", st.Warnings, len(want))
	}
	for _, w := range want {
		if !strings.Contains(s.stderr.String(), w) {
			t.Errorf("status stderr does not contain %q:\n%s", w, &s.stderr)
		}
	}
	if strings.Contains(s.stderr.String(), "PATH") {
		t.Errorf("status warns about PATH, which a Run value does not hold:\n%s", &s.stderr)
	}

	s.key.values["fly"] = `"C:\flyd.exe run`
	if st := s.status(t); !st.Installed || !strings.Contains(strings.Join(st.Warnings, "\n"), "cannot read "+s.file+": unterminated") {
		t.Errorf("status of a broken Run value = %+v", st)
	}
}

// TestServiceRunKeyEnvironment: a Run value holds no environment, so
// install says where FLY_SOCKET and FLY_STATE_DIR have to be set.
func TestServiceRunKeyEnvironment(t *testing.T) {
	s := newRunKeySvcTest(t)
	s.env[paths.EnvSocket] = filepath.Join(t.TempDir(), "flyd.sock")
	if code := s.exec(t, "install"); code != 0 {
		t.Fatalf("install exits %d, want 0; stderr:\n%s", code, &s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "FLY_SOCKET is set here") || !strings.Contains(s.stderr.String(), "setx FLY_SOCKET") {
		t.Errorf("install with FLY_SOCKET set warns %q, want a hint to set it with setx", &s.stderr)
	}
	if !slices.Contains(s.fly.env, paths.EnvSocket+"="+s.env[paths.EnvSocket]) {
		t.Errorf("install started flyd with %q, want FLY_SOCKET in it", s.fly.env)
	}
}

func TestPlatformForWindows(t *testing.T) {
	p, err := platformFor("windows", "")
	if err != nil {
		t.Fatalf(`platformFor("windows", "") = %v, want the Run key (no home needed)`, err)
	}
	if !p.runKey || p.name != "fly" || p.file != `HKCU\Software\Microsoft\Windows\CurrentVersion\Run\fly` || p.startArgv(1000) != nil {
		t.Errorf(`platformFor("windows") = %+v`, p)
	}
	for goos, want := range map[string]string{"windows": "USERPROFILE", "linux": "HOME", "darwin": "HOME"} {
		if got := homeVar(goos); got != want {
			t.Errorf("homeVar(%q) = %q, want %q", goos, got, want)
		}
	}
}

func TestUserHome(t *testing.T) {
	getenv := svcEnv(map[string]string{"HOME": "/home/dev", "USERPROFILE": `C:\Users\dev`})
	want := map[string]string{"windows": `C:\Users\dev`}[runtime.GOOS]
	if want == "" {
		want = "/home/dev"
	}
	if got := userHome(getenv); got != want {
		t.Errorf("userHome = %q, want %q", got, want)
	}
	if got := userHome(svcEnv(map[string]string{"HOME": "/home/dev"})); got != "/home/dev" {
		t.Errorf("userHome with HOME only = %q, want it", got)
	}
}

func TestRunCommand(t *testing.T) {
	args := []string{"run", "--no-console"}
	for _, tt := range []struct {
		flyd, want string
	}{
		{`C:\Users\dev\bin\flyd.exe`, `"C:\Users\dev\bin\flyd.exe" run --no-console`},
		{`C:\Program Files\fly\flyd.exe`, `"C:\Program Files\fly\flyd.exe" run --no-console`},
		{`C:\a&b;c^d\flyd.exe`, `"C:\a&b;c^d\flyd.exe" run --no-console`},
		{`\\server\share\flyd.exe`, `"\\server\share\flyd.exe" run --no-console`},
	} {
		got, err := runCommand(tt.flyd, args)
		if err != nil || got != tt.want {
			t.Errorf("runCommand(%q) = %q, %v; want %q", tt.flyd, got, err, tt.want)
			continue
		}
		info, err := parseRunCommand(got)
		if err != nil || info.Flyd != tt.flyd || !slices.Equal(info.Args, args) {
			t.Errorf("parseRunCommand(%q) = %+v, %v; want %s %q", got, info, err, tt.flyd, args)
		}
	}
	for _, flyd := range []string{
		`C:\a"b\flyd.exe`,
		`C:\%TEMP%\flyd.exe`,
		"C:\\a\nb\\flyd.exe",
		`C:\` + strings.Repeat("é", 240) + `\flyd.exe`,
	} {
		if got, err := runCommand(flyd, args); err == nil {
			t.Errorf("runCommand(%q) = %q, want an error", flyd, got)
		}
	}
	long := `C:\` + strings.Repeat("d", maxRunCommand-len(`"C:\" run --no-console`)-len(`\flyd.exe`)) + `\flyd.exe`
	if got, err := runCommand(long, args); err != nil || len(utf16.Encode([]rune(got))) != maxRunCommand {
		t.Errorf("runCommand of a path that just fits = %q (%d), %v; want %d characters", got, len(got), err, maxRunCommand)
	}
}

// TestParseRunCommand reads command lines as someone may have edited them.
func TestParseRunCommand(t *testing.T) {
	for _, tt := range []struct {
		line string
		flyd string
		args []string
	}{
		{`C:\fly\flyd.exe run`, `C:\fly\flyd.exe`, []string{"run"}},
		{`  "C:\Program Files\fly\flyd.exe"   run   --no-console  `, `C:\Program Files\fly\flyd.exe`, []string{"run", "--no-console"}},
		{`"C:\fly\flyd.exe"run`, `C:\fly\flyd.exe`, []string{"run"}},
		{`"C:\f\flyd.exe" run --dtd-dir "C:\My Dart\dtd"`, `C:\f\flyd.exe`, []string{"run", "--dtd-dir", `C:\My Dart\dtd`}},
		{`"C:\f\flyd.exe" a\\\"b "c\\" d\e "" "x""y"`, `C:\f\flyd.exe`, []string{`a\"b`, `c\`, `d\e`, ``, `x"y`}},
		{`C:\fly\flyd.exe`, `C:\fly\flyd.exe`, nil},
	} {
		info, err := parseRunCommand(tt.line)
		if err != nil || info.Flyd != tt.flyd || !slices.Equal(info.Args, tt.args) {
			t.Errorf("parseRunCommand(%q) = %q %q, %v; want %q %q", tt.line, info.Flyd, info.Args, err, tt.flyd, tt.args)
		}
	}
	for _, line := range []string{"", "   ", `"C:\fly\flyd.exe run`, `"" run`} {
		if info, err := parseRunCommand(line); err == nil {
			t.Errorf("parseRunCommand(%q) = %+v, want an error", line, info)
		}
	}
}

// FuzzRunCommand: a Run value's command line is outside input (anyone may
// edit it): parsing never panics, and what runCommand writes reads back
// as it was.
func FuzzRunCommand(f *testing.F) {
	f.Add(`C:\Program Files\fly\flyd.exe`, "--log-level", `a "b" \c\\`)
	f.Add(`\\srv\s\flyd.exe`, `"`, `\\"\`)
	f.Fuzz(func(t *testing.T, flyd, a1, a2 string) {
		parseRunCommand(flyd + " " + a1 + a2)
		args := []string{a1, a2}
		if strings.ContainsAny(a1+a2, "\x00") {
			return
		}
		line, err := runCommand(flyd, args)
		if err != nil {
			return
		}
		info, err := parseRunCommand(line)
		if strings.TrimLeft(flyd, " \t") != flyd || flyd == "" {
			return // Windows drops the blanks before the program, and needs one
		}
		if err != nil || info.Flyd != flyd || !slices.Equal(info.Args, args) {
			t.Errorf("parseRunCommand(runCommand(%q, %q) = %q) = %q %q, %v", flyd, args, line, info.Flyd, info.Args, err)
		}
	})
}
