package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kardianos/service"
)

// This file holds the service tests' harness and fake manager, and the tests of all verbs but status.

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

// fakeManager stands in for kardianos/service: it writes the unit text it
// is given where kardianos would, and tracks whether flyd "runs". For the
// package's unit (packagedService) it tracks whether the unit is enabled
// instead, and never writes or removes it.
type fakeManager struct {
	t         *testing.T
	p         servicePlatform
	cfg       *service.Config
	running   bool
	statusErr error // Status's error when not running
	enabled   *bool // the package's unit is enabled (svcTest.packagedOn)
	calls     []string
}

func (m *fakeManager) Install() error {
	m.calls = append(m.calls, "install")
	if m.p.packaged { // systemctl --user enable
		if _, ok := m.cfg.Option[m.p.option]; ok {
			m.t.Errorf("Install of the package's unit was given a unit to write")
		}
		*m.enabled = true
		return nil
	}
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
	if m.p.packaged { // systemctl --user disable
		*m.enabled = false
		return nil
	}
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
// and lingering. The package's unit is looked for in a temp directory
// too, where there is none until a test writes it (packageUnit).
type svcTest struct {
	*serviceCmd
	home, bin, flyd string
	env             map[string]string
	mgr             *fakeManager
	linger          bool
	packagedOn      bool // the package's unit is enabled
	stdout, stderr  bytes.Buffer
}

func newSvcTest(t *testing.T, goos string) *svcTest {
	t.Helper()
	if runtime.GOOS == "windows" && (goos == "linux" || goos == "darwin") {
		// The flow is the same as the Run key's (service_runkey_test.go).
		t.Skipf("a %s unit holds Unix paths, and this test's temp paths are Windows's", goos)
	}
	dir := t.TempDir()
	s := &svcTest{home: filepath.Join(dir, "home"), bin: filepath.Join(dir, "bin"), linger: true}
	s.flyd = filepath.Join(s.bin, flydExe)
	svcWriteExecutable(t, s.flyd)
	svcWriteExecutable(t, filepath.Join(s.bin, "flyctl"+exeSuffix))
	s.env = map[string]string{
		"HOME":         s.home,
		"USER":         "dev",
		"PATH":         strings.Join([]string{s.bin, "/usr/bin", "/bin"}, string(filepath.ListSeparator)),
		"FLUTTER_ROOT": filepath.Join(dir, "flutter"),
	}
	s.serviceCmd = &serviceCmd{
		goos:       goos,
		getenv:     func(k string) string { return s.env[k] },
		geteuid:    func() int { return 1000 },
		executable: func() (string, error) { return filepath.Join(s.bin, "flyctl"+exeSuffix), nil },
		connect: func(_ context.Context, p servicePlatform, cfg *service.Config) (serviceManager, error) {
			if s.mgr == nil {
				s.mgr = &fakeManager{t: t, enabled: &s.packagedOn}
			}
			s.mgr.p, s.mgr.cfg = p, cfg
			return s.mgr, nil
		},
		enabled: func(_ context.Context, p servicePlatform) (bool, error) {
			if !p.packaged {
				t.Errorf("asked whether %s is enabled, which is not the package's unit", p.file)
			}
			return s.packagedOn, nil
		},
		packagedUnit: filepath.Join(dir, "usr", "lib", "systemd", "user", "flyd.service"),
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
					"<key>RunAtLoad</key>\n\t<true/>", "<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>",
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
	svcWriteExecutable(t, filepath.Join(bin, flydExe))
	env := svcEnv(map[string]string{"HOME": filepath.Join(dir, "home"), "PATH": bin, "LOCALAPPDATA": filepath.Join(dir, "local")})
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"service", "install", "--dry-run", "--allow-root"}, env, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Fatalf("flyctl service install --dry-run = %v", err)
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "windows" {
		return
	}
	p := svcPlatform(t, runtime.GOOS, filepath.Join(dir, "home"))
	if !strings.Contains(stderr.String(), p.file) {
		t.Errorf("flyctl service install --dry-run stderr = %q, want %s", &stderr, p.file)
	}
	if want := filepath.Join(bin, flydExe); !strings.Contains(stdout.String(), want) {
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
	s := newSvcTest(t, "freebsd")
	if code := s.exec(t, "status"); code != 1 || !strings.Contains(s.stderr.String(), "flyd run") {
		t.Errorf("status on freebsd exits %d with %q, want 1 with a hint", code, &s.stderr)
	}
}
