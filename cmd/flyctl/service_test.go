package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kardianos/service"
)

// svcGoldenSpec is a fixed unit spec, so the golden files hold no path of the
// machine the tests run on.
func svcGoldenSpec(p servicePlatform) unitSpec {
	return unitSpec{
		Flyd: "/home/dev/.local/bin/flyd",
		Env: bakeEnv(svcEnv(map[string]string{
			"PATH":         "/home/dev/.local/bin:/home/dev/flutter/bin:/usr/local/bin:/usr/bin:/bin",
			"FLUTTER_ROOT": "/home/dev/flutter",
			"JAVA_HOME":    "/usr/lib/jvm/java-17",
			"EDITOR":       "vi", // not baked
		})),
		Log: p.log,
	}
}

func svcEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func svcPlatform(t *testing.T, goos, home string) servicePlatform {
	t.Helper()
	p, err := platformFor(goos, home)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServiceRender renders both platforms' units from the packaging
// templates, on whatever OS the test runs on.
func TestServiceRender(t *testing.T) {
	const path = "PATH=/home/dev/.local/bin:/home/dev/flutter/bin:/usr/local/bin:/usr/bin:/bin"
	tests := []struct {
		goos, golden string
		file         string
		want         []string
	}{
		{
			goos:   "linux",
			golden: "service/flyd.service.golden",
			file:   "/home/dev/.config/systemd/user/flyd.service",
			want: []string{
				"\n[Service]\n",
				"\nExecStart=/home/dev/.local/bin/flyd run\n",
				"\nEnvironment=\"" + path + "\"\n",
				"\nEnvironment=\"FLUTTER_ROOT=/home/dev/flutter\"\n",
				"\nEnvironment=\"JAVA_HOME=/usr/lib/jvm/java-17\"\n",
				"\nRestart=on-failure\n",
				"\nRestartSec=2\n",
				"\n[Install]\nWantedBy=default.target\n",
			},
		},
		{
			goos:   "darwin",
			golden: "service/dev.fly.flyd.plist.golden",
			file:   "/home/dev/Library/LaunchAgents/dev.fly.flyd.plist",
			want: []string{
				"<key>Label</key>\n\t<string>dev.fly.flyd</string>",
				"<key>ProgramArguments</key>\n\t<array>\n\t\t<string>/home/dev/.local/bin/flyd</string>\n\t\t<string>run</string>\n\t</array>",
				"<key>EnvironmentVariables</key>\n\t<dict>\n\t\t<key>PATH</key>\n\t\t<string>" + strings.TrimPrefix(path, "PATH=") + "</string>\n",
				"<key>FLUTTER_ROOT</key>\n\t\t<string>/home/dev/flutter</string>",
				"<key>RunAtLoad</key>\n\t<true/>",
				"<key>KeepAlive</key>\n\t<true/>",
				"<key>StandardOutPath</key>\n\t<string>/home/dev/Library/Logs/fly/flyd.log</string>",
				"<key>StandardErrorPath</key>\n\t<string>/home/dev/Library/Logs/fly/flyd.log</string>",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.goos, func(t *testing.T) {
			p := svcPlatform(t, tt.goos, "/home/dev")
			if p.file != tt.file {
				t.Errorf("platformFor(%s).file = %s, want %s", tt.goos, p.file, tt.file)
			}
			got, err := renderUnit(p, svcGoldenSpec(p))
			if err != nil {
				t.Fatalf("renderUnit(%s) = %v", tt.goos, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("renderUnit(%s) does not contain %q:\n%s", tt.goos, w, got)
				}
			}
			for _, bad := range []string{"/etc", "@", "{{", "EDITOR"} {
				if strings.Contains(got, bad) {
					t.Errorf("renderUnit(%s) contains %q:\n%s", tt.goos, bad, got)
				}
			}
			checkGolden(t, tt.golden, got)

			info, err := parseUnit(p, []byte(got))
			if err != nil {
				t.Fatalf("parseUnit(renderUnit(%s)) = %v", tt.goos, err)
			}
			if info.Flyd != "/home/dev/.local/bin/flyd" || !slices.Equal(info.Args, []string{"run"}) {
				t.Errorf("parseUnit(renderUnit(%s)) runs %q %q, want /home/dev/.local/bin/flyd [run]", tt.goos, info.Flyd, info.Args)
			}
			if "PATH="+info.Env["PATH"] != path {
				t.Errorf("parseUnit(renderUnit(%s)).Env[PATH] = %q, want %q", tt.goos, info.Env["PATH"], path)
			}
		})
	}
}

// TestServiceRenderQuoting round-trips awkward paths and values through
// render and parse, for both formats.
func TestServiceRenderQuoting(t *testing.T) {
	specs := []unitSpec{
		{Flyd: "/opt/fly/bin/flyd"},
		{Flyd: "/Users/Jo Doe/fly bin/flyd", Env: []unitEnv{{"PATH", "/Users/Jo Doe/bin:/usr/bin"}}},
		{Flyd: "/opt/fly/flyd", Env: []unitEnv{{"PATH", `/x"y:/a\b`}, {"JAVA_HOME", "/jdk 17 'lts'"}}},
		{Flyd: "/home/100%/$HOME/flyd", Env: []unitEnv{{"PATH", "/p%n/$PATH:/q;r"}}},
		{Flyd: "/tmp/<a&b>/'q'/flyd", Env: []unitEnv{{"PATH", "<&>'\""}}},
		{Flyd: `/home/a"b\c/flyd`},
	}
	for _, goos := range []string{"linux", "darwin"} {
		p := svcPlatform(t, goos, "/home/dev")
		for _, spec := range specs {
			spec.Log = p.log
			text, err := renderUnit(p, spec)
			if goos == "linux" && strings.ContainsAny(spec.Flyd, `"'\`) {
				// systemd refuses such a binary path however it is quoted.
				if err == nil {
					t.Errorf("renderUnit(linux, %q) = nil error, want one", spec.Flyd)
				}
				continue
			}
			if err != nil {
				t.Fatalf("renderUnit(%s, %q) = %v", goos, spec.Flyd, err)
			}
			info, err := parseUnit(p, []byte(text))
			if err != nil {
				t.Fatalf("parseUnit(renderUnit(%s, %q)) = %v\n%s", goos, spec.Flyd, err, text)
			}
			if info.Flyd != spec.Flyd || !slices.Equal(info.Args, []string{"run"}) {
				t.Errorf("parseUnit(renderUnit(%s, %q)) runs %q %q, want %q [run]\n%s", goos, spec.Flyd, info.Flyd, info.Args, spec.Flyd, text)
			}
			want := map[string]string{}
			for _, e := range spec.Env {
				want[e.Name] = e.Value
			}
			if !reflect.DeepEqual(info.Env, want) {
				t.Errorf("parseUnit(renderUnit(%s, %q)).Env = %q, want %q\n%s", goos, spec.Flyd, info.Env, want, text)
			}
		}
	}
	p := svcPlatform(t, "linux", "/home/dev")
	if _, err := renderUnit(p, unitSpec{Flyd: "/a/flyd", Env: []unitEnv{{"PATH", "/a\n[Service]"}}}); err == nil {
		t.Errorf("renderUnit with a newline in PATH = nil, want an error")
	}
	if _, err := renderUnit(p, unitSpec{Flyd: "flyd"}); err == nil {
		t.Errorf("renderUnit with a relative flyd = nil, want an error")
	}
}

func TestServiceTemplateFill(t *testing.T) {
	got, err := fillTemplate("a=@A@ @A@\n\t@B@\n  @NONE@\nend @A@\n",
		map[string]string{"A": "@B@"}, map[string][]string{"B": {"x", "y"}, "NONE": nil})
	want := "a=@B@ @B@\n\tx\n\ty\nend @B@\n"
	if err != nil || got != want {
		t.Errorf("fillTemplate = %q, %v, want %q, nil", got, err, want)
	}
	if _, err := fillTemplate("x=@MISSING@\n", nil, nil); err == nil || !strings.Contains(err.Error(), "@MISSING@") {
		t.Errorf("fillTemplate with an unknown placeholder = %v, want an error naming it", err)
	}
}

// fakeManager stands in for kardianos/service: it writes the unit text it
// is given where kardianos would, and tracks whether flyd "runs".
type fakeManager struct {
	t         *testing.T
	p         servicePlatform
	cfg       *service.Config
	running   bool
	statusErr error // Status's error when not running
	calls     []string
}

func (m *fakeManager) Install() error {
	m.calls = append(m.calls, "install")
	unit, _ := m.cfg.Option[m.p.option].(string)
	if unit == "" {
		m.t.Errorf("Install: no %s option in the service config", m.p.option)
	}
	if _, err := os.Stat(m.p.file); err == nil {
		return fmt.Errorf("Init already exists: %s", m.p.file) // as kardianos does
	}
	if err := os.MkdirAll(filepath.Dir(m.p.file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(m.p.file, []byte(unit), 0o644)
}

func (m *fakeManager) Uninstall() error {
	m.calls = append(m.calls, "uninstall")
	return os.Remove(m.p.file)
}

func (m *fakeManager) Start() error { m.calls = append(m.calls, "start"); m.running = true; return nil }
func (m *fakeManager) Stop() error  { m.calls = append(m.calls, "stop"); m.running = false; return nil }
func (m *fakeManager) Restart() error {
	m.calls = append(m.calls, "restart")
	m.running = true
	return nil
}

func (m *fakeManager) Status() (service.Status, error) {
	switch {
	case m.running:
		return service.StatusRunning, nil
	case m.statusErr != nil:
		return service.StatusUnknown, m.statusErr
	case svcFileExists(m.p.file):
		return service.StatusStopped, nil
	}
	return service.StatusUnknown, service.ErrNotInstalled
}

func svcFileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// svcTest is a serviceCmd on a temp HOME, with flyctl and an executable
// flyd in a temp bin directory, a fake service manager and a given euid
// and lingering.
type svcTest struct {
	*serviceCmd
	home, bin, flyd string
	env             map[string]string
	mgr             *fakeManager
	linger          bool
	stdout, stderr  bytes.Buffer
}

func newSvcTest(t *testing.T, goos string) *svcTest {
	t.Helper()
	dir := t.TempDir()
	s := &svcTest{home: filepath.Join(dir, "home"), bin: filepath.Join(dir, "bin"), linger: true}
	s.flyd = filepath.Join(s.bin, "flyd")
	svcWriteExecutable(t, s.flyd)
	svcWriteExecutable(t, filepath.Join(s.bin, "flyctl"))
	s.env = map[string]string{
		"HOME":         s.home,
		"USER":         "dev",
		"PATH":         s.bin + ":/usr/bin:/bin",
		"FLUTTER_ROOT": filepath.Join(dir, "flutter"),
	}
	s.serviceCmd = &serviceCmd{
		goos:       goos,
		getenv:     func(k string) string { return s.env[k] },
		geteuid:    func() int { return 1000 },
		executable: func() (string, error) { return filepath.Join(s.bin, "flyctl"), nil },
		connect: func(_ context.Context, p servicePlatform, cfg *service.Config) (serviceManager, error) {
			if s.mgr == nil {
				s.mgr = &fakeManager{t: t}
			}
			s.mgr.p, s.mgr.cfg = p, cfg
			return s.mgr, nil
		},
		linger: func(_ context.Context, user string) (bool, error) {
			if user != "dev" {
				t.Errorf("linger asked for user %q, want dev", user)
			}
			return s.linger, nil
		},
	}
	s.serviceCmd.stdout, s.serviceCmd.stderr = &s.stdout, &s.stderr
	return s
}

func svcWriteExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// exec runs "flyctl service args..." and returns its exit code.
func (s *svcTest) exec(t *testing.T, args ...string) int {
	t.Helper()
	s.stdout.Reset()
	s.stderr.Reset()
	err := s.run(context.Background(), args)
	return exitCode(err, &s.stderr)
}

func (s *svcTest) unit(t *testing.T) string {
	t.Helper()
	p := svcPlatform(t, s.goos, s.home)
	b, err := os.ReadFile(p.file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServiceDryRun prints each platform's unit for a temp HOME without
// writing it or asking the service manager.
func TestServiceDryRun(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		t.Run(goos, func(t *testing.T) {
			s := newSvcTest(t, goos)
			s.connect = func(context.Context, servicePlatform, *service.Config) (serviceManager, error) {
				t.Fatal("install --dry-run asked the service manager")
				return nil, nil
			}
			if code := s.exec(t, "install", "--dry-run"); code != 0 {
				t.Fatalf("install --dry-run exits %d, want 0; stderr:\n%s", code, &s.stderr)
			}
			p := svcPlatform(t, goos, s.home)
			if !strings.Contains(s.stderr.String(), "would write "+p.file) {
				t.Errorf("install --dry-run stderr = %q, want the unit's path %s", &s.stderr, p.file)
			}
			if svcFileExists(p.file) {
				t.Errorf("install --dry-run wrote %s", p.file)
			}
			got := s.stdout.String()
			var want []string
			if goos == "linux" {
				if !strings.HasPrefix(p.file, filepath.Join(s.home, ".config", "systemd", "user")) {
					t.Errorf("unit path %s is not under ~/.config/systemd/user", p.file)
				}
				want = []string{
					"\nExecStart=" + s.flyd + " run\n",
					"\nEnvironment=\"PATH=" + s.env["PATH"] + "\"\n",
					"\nEnvironment=\"FLUTTER_ROOT=" + s.env["FLUTTER_ROOT"] + "\"\n",
					"\nWantedBy=default.target\n", "\nRestart=on-failure\n", "\nRestartSec=2\n",
				}
			} else {
				logs := filepath.Join(s.home, "Library", "Logs", "fly", "flyd.log")
				want = []string{
					"<string>" + s.flyd + "</string>\n\t\t<string>run</string>",
					"<key>PATH</key>\n\t\t<string>" + s.env["PATH"] + "</string>",
					"<key>StandardOutPath</key>\n\t<string>" + logs + "</string>",
					"<key>StandardErrorPath</key>\n\t<string>" + logs + "</string>",
					"<key>RunAtLoad</key>\n\t<true/>", "<key>KeepAlive</key>\n\t<true/>",
				}
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("install --dry-run does not print %q:\n%s", w, got)
				}
			}
			if strings.Contains(got, "/etc") {
				t.Errorf("install --dry-run prints a /etc path:\n%s", got)
			}
		})
	}
}

// TestServiceDryRunCLI goes through flyctl's real entry point and real
// hooks: --dry-run must not need a service manager on the machine.
func TestServiceDryRunCLI(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	svcWriteExecutable(t, filepath.Join(bin, "flyd"))
	env := svcEnv(map[string]string{"HOME": filepath.Join(dir, "home"), "PATH": bin})
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"service", "install", "--dry-run", "--allow-root"}, env, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("flyctl service install --dry-run = %v", err)
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		return
	}
	p := svcPlatform(t, runtime.GOOS, filepath.Join(dir, "home"))
	if !strings.Contains(stderr.String(), p.file) {
		t.Errorf("flyctl service install --dry-run stderr = %q, want %s", &stderr, p.file)
	}
	if want := filepath.Join(bin, "flyd"); !strings.Contains(stdout.String(), want) {
		t.Errorf("flyctl service install --dry-run does not run %s (found on PATH):\n%s", want, &stdout)
	}
}

func TestServiceInstallForce(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		t.Run(goos, func(t *testing.T) {
			s := newSvcTest(t, goos)
			if code := s.exec(t, "install"); code != 0 {
				t.Fatalf("install exits %d, want 0; stderr:\n%s", code, &s.stderr)
			}
			first := s.unit(t)
			if !strings.Contains(first, s.flyd) {
				t.Errorf("installed unit does not run %s:\n%s", s.flyd, first)
			}
			if !slices.Equal(s.mgr.calls, []string{"install", "start"}) {
				t.Errorf("install called %v, want [install start]", s.mgr.calls)
			}
			if s.mgr.cfg.Name != svcPlatform(t, goos, s.home).name || s.mgr.cfg.Option["UserService"] != true {
				t.Errorf("install configured %q UserService=%v, want a user service", s.mgr.cfg.Name, s.mgr.cfg.Option["UserService"])
			}
			if goos == "darwin" && !svcFileExists(filepath.Join(s.home, "Library", "Logs", "fly")) {
				t.Errorf("install did not create ~/Library/Logs/fly")
			}

			p := svcPlatform(t, goos, s.home)
			os.WriteFile(p.file, []byte("stale"), 0o644)
			s.mgr.calls = nil
			if code := s.exec(t, "install"); code != 1 {
				t.Errorf("install over an existing unit exits %d, want 1", code)
			}
			if !strings.Contains(s.stderr.String(), "flyctl service install --force") {
				t.Errorf("install over an existing unit says %q, want a hint to use --force", &s.stderr)
			}
			if s.unit(t) != "stale" || s.mgr.calls != nil {
				t.Errorf("install without --force touched the unit (calls %v)", s.mgr.calls)
			}

			s.env["PATH"] = "/new/bin:" + s.env["PATH"]
			if code := s.exec(t, "install", "--force"); code != 0 {
				t.Fatalf("install --force exits %d, want 0; stderr:\n%s", code, &s.stderr)
			}
			if got := s.unit(t); got == "stale" || !strings.Contains(got, "/new/bin:") {
				t.Errorf("install --force did not rewrite the unit with the new PATH:\n%s", got)
			}
			if !slices.Equal(s.mgr.calls, []string{"install", "restart"}) {
				t.Errorf("install --force of a running service called %v, want [install restart]", s.mgr.calls)
			}
		})
	}
}

func TestServiceInstallRoot(t *testing.T) {
	tests := []struct {
		euid    int
		sudoUID string
		args    []string
		want    string // in the error; "" for success
	}{
		{0, "", nil, "refusing to install as root"},
		{0, "", []string{"--dry-run"}, "--allow-root"},
		{0, "1000", nil, "would install flyd as a service of root"},
		{0, "", []string{"--allow-root"}, ""},
		{0, "1000", []string{"--allow-root"}, ""},
		{1000, "", nil, ""},
	}
	for _, tt := range tests {
		s := newSvcTest(t, "linux")
		s.geteuid = func() int { return tt.euid }
		if tt.sudoUID != "" {
			s.env["SUDO_UID"] = tt.sudoUID
		}
		code := s.exec(t, append([]string{"install"}, tt.args...)...)
		name := fmt.Sprintf("install %v as euid %d, SUDO_UID=%q", tt.args, tt.euid, tt.sudoUID)
		switch {
		case tt.want == "" && code != 0:
			t.Errorf("%s exits %d, want 0; stderr:\n%s", name, code, &s.stderr)
		case tt.want != "" && (code != 1 || !strings.Contains(s.stderr.String(), tt.want)):
			t.Errorf("%s exits %d with %q, want 1 with %q", name, code, &s.stderr, tt.want)
		case tt.want != "" && s.mgr != nil:
			t.Errorf("%s asked the service manager after refusing", name)
		}
	}
}

func TestServiceLifecycleFake(t *testing.T) {
	s := newSvcTest(t, "linux")
	if code := s.exec(t, "start"); code != 1 || !strings.Contains(s.stderr.String(), "not installed; install it with: flyctl service install") {
		t.Errorf("start before install exits %d with %q, want 1 with a hint", code, &s.stderr)
	}
	steps := []struct {
		args  []string
		calls []string
		out   string
	}{
		{[]string{"install"}, []string{"install", "start"}, "installed"},
		{[]string{"start"}, nil, "already running"},
		{[]string{"stop"}, []string{"stop"}, "stopped flyd"},
		{[]string{"stop"}, nil, "not running"},
		{[]string{"restart"}, []string{"start"}, "started flyd"},
		{[]string{"restart"}, []string{"restart"}, "restarted flyd"},
		{[]string{"uninstall"}, []string{"stop", "uninstall"}, "removed"},
		{[]string{"uninstall"}, nil, ""},
	}
	for _, st := range steps {
		if s.mgr != nil {
			s.mgr.calls = nil
		}
		if code := s.exec(t, st.args...); code != 0 {
			t.Fatalf("%v exits %d, want 0; stderr:\n%s", st.args, code, &s.stderr)
		}
		var calls []string
		if s.mgr != nil {
			calls = s.mgr.calls
		}
		if !slices.Equal(calls, st.calls) {
			t.Errorf("%v called %v, want %v", st.args, calls, st.calls)
		}
		if !strings.Contains(s.stdout.String(), st.out) {
			t.Errorf("%v printed %q, want %q", st.args, &s.stdout, st.out)
		}
	}
	if p := svcPlatform(t, "linux", s.home); svcFileExists(p.file) {
		t.Errorf("uninstall left %s", p.file)
	}
}

// TestServiceStatusDrift writes a unit that runs another flyd with another
// PATH into the temp HOME, and expects status to say so, and to warn that
// lingering is off.
func TestServiceStatusDrift(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		t.Run(goos, func(t *testing.T) {
			s := newSvcTest(t, goos)
			s.linger = false
			old := filepath.Join(t.TempDir(), "old", "flyd")
			svcWriteExecutable(t, old)
			p := svcPlatform(t, goos, s.home)
			unit, err := renderUnit(p, unitSpec{Flyd: old, Env: []unitEnv{{"PATH", "/old/bin:/usr/bin"}}, Log: p.log})
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(p.file), 0o755)
			if err := os.WriteFile(p.file, []byte(unit), 0o644); err != nil {
				t.Fatal(err)
			}

			if code := s.exec(t, "status"); code != 0 {
				t.Fatalf("status exits %d, want 0; stderr:\n%s", code, &s.stderr)
			}
			for _, w := range []string{"flyd service: stopped\n", "runs:  " + old + " run\n", "PATH:  /old/bin:/usr/bin\n"} {
				if !strings.Contains(s.stdout.String(), w) {
					t.Errorf("status stdout does not contain %q:\n%s", w, &s.stdout)
				}
			}
			want := []string{
				"the service runs " + old + "; this flyctl is next to " + s.flyd + ": run flyctl service install --force",
				"the service's PATH differs from yours",
				"service: /old/bin:/usr/bin\n",
				"yours:   " + s.env["PATH"] + "\n",
			}
			linger := "the service stops when you log out; enable it with: loginctl enable-linger $USER"
			if goos == "linux" {
				want = append(want, linger)
			} else if strings.Contains(s.stderr.String(), linger) {
				t.Errorf("status warns about lingering on macOS")
			}
			for _, w := range want {
				if !strings.Contains(s.stderr.String(), w) {
					t.Errorf("status stderr does not contain %q:\n%s", w, &s.stderr)
				}
			}

			if code := s.exec(t, "status", "--json"); code != 0 {
				t.Fatalf("status --json exits %d, want 0; stderr:\n%s", code, &s.stderr)
			}
			var st serviceStatus
			if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil {
				t.Fatalf("status --json is not JSON: %v\n%s", err, &s.stdout)
			}
			if !st.Installed || st.State != "stopped" || st.Flyd != old || st.CurrentFlyd != s.flyd ||
				st.Path != "/old/bin:/usr/bin" || st.CurrentPath != s.env["PATH"] || st.Unit != p.file {
				t.Errorf("status --json = %+v", st)
			}
			if n := 2 + map[string]int{"linux": 1}[goos]; len(st.Warnings) != n {
				t.Errorf("status --json has %d warnings, want %d: %q", len(st.Warnings), n, st.Warnings)
			}
			if goos == "linux" && (st.Linger == nil || *st.Linger) {
				t.Errorf("status --json linger = %v, want false", st.Linger)
			}
		})
	}
}

// TestServiceStatusClean installs and expects no warnings.
func TestServiceStatusClean(t *testing.T) {
	s := newSvcTest(t, "linux")
	if code := s.exec(t, "status", "--json"); code != 0 {
		t.Fatalf("status exits %d; stderr:\n%s", code, &s.stderr)
	}
	var st serviceStatus
	if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil || st.Installed || st.State != "not installed" {
		t.Errorf("status --json before install = %+v, %v; want not installed", st, err)
	}
	s.exec(t, "install")
	if code := s.exec(t, "status"); code != 0 || s.stderr.Len() != 0 {
		t.Errorf("status after install exits %d with stderr %q, want 0 and no warnings", code, &s.stderr)
	}
	if want := "flyd service: running\n"; !strings.HasPrefix(s.stdout.String(), want) {
		t.Errorf("status after install prints %q, want it to start with %q", &s.stdout, want)
	}
	s.exec(t, "status", "--json")
	if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil || !st.Running || len(st.Warnings) != 0 || st.Linger == nil || !*st.Linger {
		t.Errorf("status --json after install = %+v, %v", st, err)
	}
}

// TestServiceForeignFlyd: a flyd that the service did not start holds the
// lock, so starting the service's would only make it crash-loop.
func TestServiceForeignFlyd(t *testing.T) {
	s := newSvcTest(t, "linux")
	s.ping = func(context.Context) (int, error) { return 4242, nil }
	if code := s.exec(t, "install"); code != 1 || !strings.Contains(s.stderr.String(), "installed but not started") || !strings.Contains(s.stderr.String(), "kill 4242") {
		t.Errorf("install with a foreign flyd exits %d with %q, want 1 and a hint to kill it", code, &s.stderr)
	}
	if !slices.Equal(s.mgr.calls, []string{"install"}) {
		t.Errorf("install with a foreign flyd called %v, want [install]", s.mgr.calls)
	}
	s.mgr.calls = nil
	if code := s.exec(t, "start"); code != 1 || !strings.Contains(s.stderr.String(), "pid 4242") || s.mgr.calls != nil {
		t.Errorf("start with a foreign flyd exits %d with %q and calls %v, want 1, a hint, no calls", code, &s.stderr, s.mgr.calls)
	}

	// Once it is gone, start waits for the service's flyd to answer.
	pings := 0
	s.ping = func(context.Context) (int, error) {
		pings++
		if pings < 4 { // foreign check, then two misses while flyd starts
			return 0, errors.New("connection refused")
		}
		return 1, nil
	}
	if code := s.exec(t, "start"); code != 0 || pings != 4 {
		t.Errorf("start exits %d after %d pings, want 0 after 4; stderr:\n%s", code, pings, &s.stderr)
	}
}

func TestServiceStatusStates(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errRestarting, "restarting"},
		{errors.New("service in failed state"), "failed"},
		{errors.New("systemctl: exit status 1"), "unknown"},
	}
	for _, tt := range tests {
		s := newSvcTest(t, "linux")
		s.exec(t, "install")
		s.mgr.running, s.mgr.statusErr = false, tt.err
		if code := s.exec(t, "status", "--json"); code != 0 {
			t.Fatalf("status exits %d; stderr:\n%s", code, &s.stderr)
		}
		var st serviceStatus
		if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil || st.State != tt.want || len(st.Warnings) != 1 {
			t.Errorf("status with %q = %+v, %v; want state %s and one warning", tt.err, st, err, tt.want)
		}
	}
}

func TestServiceUsage(t *testing.T) {
	env := svcEnv(map[string]string{"HOME": t.TempDir()})
	for _, args := range [][]string{
		{"service"},
		{"service", "bogus"},
		{"service", "install", "extra"},
		{"service", "install", "--bogus"},
		{"service", "status", "--bogus"},
		{"service", "start", "now"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, env, strings.NewReader(""), &stdout, &stderr)
		if code := exitCode(err, io.Discard); code != 2 {
			t.Errorf("flyctl %v exits %d (%v), want 2", args, code, err)
		}
	}
	for _, verb := range []string{"--help", "install", "uninstall", "start", "stop", "restart", "status"} {
		args := []string{"service", verb, "--help"}
		if verb == "--help" {
			args = args[:2]
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, env, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Errorf("flyctl %v = %v, want nil", args, err)
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "Usage:\n  flyctl service") {
			t.Errorf("flyctl %v does not start with its usage:\n%s", args, out)
		}
		_, examples, ok := strings.Cut(out, "\nExamples:\n")
		if !ok || strings.Contains(examples, "\n\n") || !strings.HasPrefix(strings.TrimSpace(examples), "flyctl service") {
			t.Errorf("flyctl %v does not end with examples:\n%s", args, out)
		}
	}
}

func TestServiceUnsupportedOS(t *testing.T) {
	s := newSvcTest(t, "windows")
	if code := s.exec(t, "status"); code != 1 || !strings.Contains(s.stderr.String(), "flyd run") {
		t.Errorf("status on windows exits %d with %q, want 1 with a hint", code, &s.stderr)
	}
}

// TestServiceNoUserSystemd checks the hint when this machine has no user
// systemd, as in CI containers.
func TestServiceNoUserSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux only")
	}
	if err := probeSystemdUser(context.Background()); err == nil {
		t.Skip("systemctl --user works here; TestServiceSystemdUser covers it")
	}
	home := t.TempDir()
	p := svcPlatform(t, "linux", home)
	os.MkdirAll(filepath.Dir(p.file), 0o755)
	os.WriteFile(p.file, []byte("[Service]\nExecStart=/x/flyd run\n"), 0o644)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"service", "start"}, svcEnv(map[string]string{"HOME": home}), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "systemctl --user is not available") || !strings.Contains(err.Error(), "run flyd in the foreground with: flyd run") {
		t.Errorf("flyctl service start without user systemd = %v, want a hint", err)
	}
	if code := exitCode(err, io.Discard); code != 1 {
		t.Errorf("flyctl service start without user systemd exits %d, want 1", code)
	}
}

// TestServiceSystemdUser installs, starts, stops and removes the service for
// real, with a flyd built from this tree. It needs a user systemd session,
// which CI containers lack, and leaves an existing flyd service alone.
func TestServiceSystemdUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux only")
	}
	if err := probeSystemdUser(context.Background()); err != nil {
		t.Skipf("no user systemd here, so only the rendering is tested: %v", err)
	}
	if testing.Short() {
		t.Skip("-short: not touching the user's systemd")
	}
	p := svcPlatform(t, "linux", os.Getenv("HOME"))
	if svcFileExists(p.file) {
		t.Skipf("%s exists; not touching this user's flyd service", p.file)
	}
	dir, err := os.MkdirTemp("", "fly")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../flyd").CombinedOutput(); err != nil {
		t.Fatalf("go build flyd: %v\n%s", err, out)
	}
	env := map[string]string{
		"FLY_SOCKET":    filepath.Join(dir, "flyd.sock"),
		"FLY_STATE_DIR": filepath.Join(dir, "state"),
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	var stdout, stderr bytes.Buffer
	c := &serviceCmd{
		goos:       runtime.GOOS,
		getenv:     getenv,
		geteuid:    os.Geteuid,
		executable: func() (string, error) { return filepath.Join(bin, "flyctl"), nil },
		connect:    connectManager,
		linger:     lingerEnabled,
		ping:       pingDaemon(getenv),
		stdout:     &stdout,
		stderr:     &stderr,
	}
	ctx := context.Background()
	t.Cleanup(func() {
		if svcFileExists(p.file) {
			c.run(ctx, []string{"uninstall"})
		}
	})
	step := func(args ...string) {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		if err := c.run(ctx, args); err != nil {
			t.Fatalf("flyctl service %v = %v\nstderr:\n%s", args, err, &stderr)
		}
	}
	wantState := func(state string) {
		t.Helper()
		step("status", "--json")
		var st serviceStatus
		if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != state || st.Flyd != filepath.Join(bin, "flyd") {
			t.Errorf("status = %+v, want %s running %s", st, state, filepath.Join(bin, "flyd"))
		}
	}
	step("install", "--allow-root")
	wantState("running")
	step("stop")
	wantState("stopped")
	step("start")
	wantState("running")
	step("restart")
	wantState("running")
	step("uninstall")
	if svcFileExists(p.file) {
		t.Errorf("uninstall left %s", p.file)
	}
	if _, err := c.ping(ctx); err == nil {
		t.Errorf("flyd still answers after uninstall")
	}
}

func TestStartArgv(t *testing.T) {
	for goos, want := range map[string]string{
		"linux":  "systemctl --user start flyd.service",
		"darwin": "launchctl kickstart gui/501/dev.fly.flyd",
	} {
		p, err := platformFor(goos, "/home/u")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(p.startArgv(501), " "); got != want {
			t.Errorf("platformFor(%s).startArgv(501) = %q, want %q", goos, got, want)
		}
	}
}
