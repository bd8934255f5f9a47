package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file tests the service verbs with a distro package's unit
// (service_packaged.go), with the fakes of service_test.go.

// packageUnit writes the package's unit, running flyd, where s looks for
// it, as installing the deb does.
func (s *svcTest) packageUnit(t *testing.T, flyd string) string {
	t.Helper()
	unit, err := renderUnit(svcPlatform(t, "linux", s.home), unitSpec{Flyd: flyd})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(s.packagedUnit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.packagedUnit, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	return unit
}

// statusJSON runs status --json and returns what it says.
func (s *svcTest) statusJSON(t *testing.T) serviceStatus {
	t.Helper()
	if code := s.exec(t, "status", "--json"); code != 0 {
		t.Fatalf("status --json exits %d; stderr:\n%s", code, &s.stderr)
	}
	var st serviceStatus
	if err := json.Unmarshal(s.stdout.Bytes(), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, &s.stdout)
	}
	return st
}

// step runs flyctl service args, wants exit code code, the manager asked
// calls, and want in stdout.
func (s *svcTest) step(t *testing.T, code int, calls []string, want string, args ...string) {
	t.Helper()
	if s.mgr != nil {
		s.mgr.calls = nil
	}
	if got := s.exec(t, args...); got != code {
		t.Fatalf("%v exits %d, want %d; stderr:\n%s", args, got, code, &s.stderr)
	}
	var got []string
	if s.mgr != nil {
		got = s.mgr.calls
	}
	if !slices.Equal(got, calls) {
		t.Errorf("%v called %v, want %v", args, got, calls)
	}
	if !strings.Contains(s.stdout.String(), want) {
		t.Errorf("%v printed %q, want %q", args, &s.stdout, want)
	}
}

// TestServicePackaged: when the package's unit runs the flyd install
// would run, install enables that unit and writes none of its own, and
// every verb acts on it; uninstall disables it and leaves its file.
func TestServicePackaged(t *testing.T) {
	s := newSvcTest(t, "linux")
	unit := s.packageUnit(t, s.flyd)
	own := svcPlatform(t, "linux", s.home).file
	pp := s.packagedUnit

	st := s.statusJSON(t)
	if st.Installed || !st.Packaged || st.Unit != pp || st.PackagedUnit != pp || st.State != "not installed" {
		t.Errorf("status --json before install = %+v, want the package's unit, not installed", st)
	}
	s.exec(t, "status")
	if want := "flyd service: not installed (the package's " + pp + " is not enabled)\n"; s.stdout.String() != want {
		t.Errorf("status before install prints %q, want %q", &s.stdout, want)
	}

	s.step(t, 0, nil, "", "install", "--dry-run")
	if s.stdout.String() != unit || !strings.Contains(s.stderr.String(), "would enable "+pp+", the package's unit (systemctl --user enable --now flyd.service), and write no unit") {
		t.Errorf("install --dry-run printed\n%s\nstderr %q; want the package's unit and what it would enable", &s.stdout, &s.stderr)
	}
	if s.packagedOn {
		t.Errorf("install --dry-run enabled the package's unit")
	}

	s.step(t, 0, []string{"install", "start"}, "enabled "+pp+", the package's unit (runs "+s.flyd+" run)\nstarted flyd", "install")
	if !s.packagedOn || svcFileExists(own) {
		t.Errorf("install: the package's unit enabled %v, %s written %v; want enabled, nothing written", s.packagedOn, own, svcFileExists(own))
	}
	if s.stderr.Len() != 0 {
		t.Errorf("install warned: %s", &s.stderr)
	}

	st = s.statusJSON(t)
	if !st.Installed || !st.Packaged || !st.Running || st.Unit != pp || st.Flyd != s.flyd || st.Path != "" || st.CurrentPath != "" || len(st.Warnings) != 0 {
		t.Errorf("status --json after install = %+v, want the package's unit running %s, no PATH (nor one to bake in), no warnings", st, s.flyd)
	}
	s.exec(t, "status")
	for _, w := range []string{"flyd service: running\n", "unit:  " + pp + " (systemd; the package's unit, enabled for you)\n", "runs:  " + s.flyd + " run\n", "PATH:  none baked in"} {
		if !strings.Contains(s.stdout.String(), w) {
			t.Errorf("status does not print %q:\n%s", w, &s.stdout)
		}
	}
	if s.stderr.Len() != 0 {
		t.Errorf("status warned: %s", &s.stderr)
	}

	s.step(t, 1, nil, "", "install")
	if !strings.Contains(s.stderr.String(), "the package's unit, enabled") || !strings.Contains(s.stderr.String(), "install --force") {
		t.Errorf("install again says %q, want that the package's unit is enabled and --force", &s.stderr)
	}
	s.step(t, 0, []string{"install", "restart"}, "restarted flyd", "install", "--force")
	s.step(t, 0, []string{"stop"}, "stopped flyd", "stop")
	s.step(t, 0, []string{"start"}, "started flyd", "start")
	s.step(t, 0, []string{"restart"}, "restarted flyd", "restart")
	s.step(t, 0, []string{"stop", "uninstall"}, "stopped flyd and disabled "+pp+", the package's unit", "uninstall")
	if s.packagedOn || s.mgr.running || !svcFileExists(pp) {
		t.Errorf("uninstall: enabled %v, running %v, the package's file there %v; want disabled, stopped, there", s.packagedOn, s.mgr.running, svcFileExists(pp))
	}
	s.step(t, 0, nil, "", "uninstall")
	if !strings.Contains(s.stderr.String(), "is not enabled); nothing to do") {
		t.Errorf("uninstall again says %q", &s.stderr)
	}
	s.step(t, 1, nil, "", "start")

	// FLY_SOCKET and FLY_STATE_DIR are not the package's unit's to carry.
	s.env["FLY_SOCKET"] = "/tmp/elsewhere.sock"
	s.step(t, 0, []string{"install", "start"}, "enabled", "install")
	if !strings.Contains(s.stderr.String(), "FLY_SOCKET is set here, but the package's unit") {
		t.Errorf("install with FLY_SOCKET set warns %q, want that the unit does not carry it", &s.stderr)
	}
}

// TestServicePackagedReplacesOwn: a unit of the user's own, written
// before the package came (or by an older flyctl), would outlive the
// package: status says so, and install --force swaps it for the
// package's.
func TestServicePackagedReplacesOwn(t *testing.T) {
	s := newSvcTest(t, "linux")
	own := svcPlatform(t, "linux", s.home).file
	s.step(t, 0, []string{"install", "start"}, "installed "+own, "install")
	pp := s.packagedUnit
	s.packageUnit(t, s.flyd)

	st := s.statusJSON(t)
	if !st.Installed || st.Packaged || st.Unit != own || st.PackagedUnit != pp || len(st.Warnings) != 1 ||
		!strings.Contains(st.Warnings[0], "your own unit "+own+" overrides the package's "+pp) {
		t.Errorf("status --json with a unit of one's own and the package's = %+v, want a warning that it overrides the package's", st)
	}
	s.step(t, 0, nil, "", "install", "--dry-run")
	if !strings.Contains(s.stderr.String(), "overrides it: install needs --force") {
		t.Errorf("install --dry-run says %q, want that --force removes the user's unit", &s.stderr)
	}
	s.step(t, 1, nil, "", "install")
	if !strings.Contains(s.stderr.String(), "your own unit, which overrides the package's") {
		t.Errorf("install says %q", &s.stderr)
	}
	s.step(t, 0, []string{"stop", "uninstall", "install", "start"}, "removed your own unit "+own, "install", "--force")
	if svcFileExists(own) || !s.packagedOn {
		t.Errorf("install --force left %s (%v) or did not enable the package's (%v)", own, svcFileExists(own), s.packagedOn)
	}
	if st := s.statusJSON(t); !st.Packaged || !st.Running || len(st.Warnings) != 0 {
		t.Errorf("status --json after install --force = %+v", st)
	}
}

// TestServicePackagedOtherFlyd: a package's unit that runs another flyd
// than this flyctl's (a user's own build in ~/.local/bin, say) is not
// install's: it writes the user's unit as without a package, replacing
// the package's, enabled, only with --force.
func TestServicePackagedOtherFlyd(t *testing.T) {
	s := newSvcTest(t, "linux")
	other := filepath.Join(t.TempDir(), "usr", "bin", "flyd")
	svcWriteExecutable(t, other)
	s.packageUnit(t, other)
	own := svcPlatform(t, "linux", s.home).file
	pp := s.packagedUnit

	if st := s.statusJSON(t); st.Packaged || st.PackagedUnit != "" || st.Unit != own {
		t.Errorf("status --json = %+v, want the user's own unit, no package's", st)
	}
	s.step(t, 0, []string{"install", "start"}, "installed "+own, "install")
	if st := s.statusJSON(t); st.Packaged || !st.Running || len(st.Warnings) != 0 {
		t.Errorf("status --json after install = %+v, want the user's unit and no warnings", st)
	}
	s.step(t, 0, []string{"stop", "uninstall"}, "removed "+own, "uninstall")

	// The user enabled the package's unit by hand (systemctl --user enable flyd).
	s.packagedOn = true
	st := s.statusJSON(t)
	if !st.Installed || !st.Packaged || st.Unit != pp || st.Flyd != other || st.PackagedUnit != "" || len(st.Warnings) != 1 ||
		!strings.Contains(st.Warnings[0], "the service runs "+other+"; this flyctl is next to "+s.flyd) {
		t.Errorf("status --json with the package's unit enabled = %+v, want it, running another flyd", st)
	}
	s.step(t, 1, nil, "", "install")
	if !strings.Contains(s.stderr.String(), "("+pp+", the package's unit, enabled); replace it with your own unit") {
		t.Errorf("install says %q", &s.stderr)
	}
	s.step(t, 0, []string{"uninstall", "install", "start"}, "installed "+own+" (runs "+s.flyd+" run)\ndisabled the package's unit "+pp, "install", "--force")
	if s.packagedOn || !svcFileExists(own) {
		t.Errorf("install --force: the package's enabled %v, %s there %v", s.packagedOn, own, svcFileExists(own))
	}

	// Both enabled, the package's for every user: uninstall removes the
	// user's, disables the package's, and says how to keep it off.
	s.packagedOn = true
	s.mgr.enabled = new(bool) // disable changes nothing: it is --global
	*s.mgr.enabled = true
	s.step(t, 0, []string{"stop", "uninstall", "uninstall"}, "stopped flyd and removed "+own+"\nstopped flyd and disabled "+pp, "uninstall")
	if !strings.Contains(s.stderr.String(), "systemctl --user mask flyd.service") {
		t.Errorf("uninstall of a unit enabled for every user says %q, want how to mask it", &s.stderr)
	}
}

// TestSetupPackaged: setup installs the service through the package's
// unit when flyd is the package's, says so, is then current, and swaps a
// unit of the user's own for it; flyctl uninstall disables it.
func TestSetupPackaged(t *testing.T) {
	e := newSetupEnv(t)
	if e.goos != "linux" {
		t.Skip("the package's unit is a systemd one")
	}
	own := svcPlatform(t, "linux", e.home).file
	e.packageUnit(t, e.flyd)

	out, errs, code := e.run(t, "", "setup", "--dry-run")
	if code != 0 || !strings.Contains(out, "service      would enable  "+e.packagedUnit+" (systemd, the package's unit), running "+e.flyd) {
		t.Errorf("setup --dry-run exits %d:\n%s\n%s", code, out, errs)
	}
	out, errs, code = e.run(t, "", "setup")
	if code != 0 || !strings.Contains(out, "service      enabled       "+e.packagedUnit+", the package's unit (runs "+e.flyd+" run)") || !e.packagedOn || svcFileExists(own) {
		t.Errorf("setup exits %d, enabled the package's unit %v:\n%s\n%s", code, e.packagedOn, out, errs)
	}
	out, _, _ = e.run(t, "", "setup")
	if !strings.Contains(out, "service      ok            installed and current ("+e.packagedUnit+", running)\n") || strings.Contains(out, "PATH") {
		t.Errorf("setup again:\n%s", out)
	}
	out, _, _ = e.run(t, "", "doctor")
	if !strings.Contains(out, "installed ("+e.packagedUnit+"), running") || strings.Contains(out, "PATH is not this shell's") {
		t.Errorf("doctor with the package's unit enabled:\n%s", out)
	}
	out, _, code = e.run(t, "", "uninstall")
	if code != 0 || e.packagedOn || !strings.Contains(out, "disabled "+e.packagedUnit) {
		t.Errorf("uninstall exits %d, the package's unit still enabled %v:\n%s", code, e.packagedOn, out)
	}

	// A unit of the user's own from before: setup swaps it.
	os.Remove(e.packagedUnit)
	if _, errs, code := e.run(t, "", "setup"); code != 0 || !svcFileExists(own) {
		t.Fatalf("setup without the package exits %d, wrote %s %v\n%s", code, own, svcFileExists(own), errs)
	}
	e.packageUnit(t, e.flyd)
	out, _, _ = e.run(t, "", "setup", "--dry-run")
	if !strings.Contains(out, "service      would update  "+own+": flyctl service install --force removes it for the package's "+e.packagedUnit) {
		t.Errorf("setup --dry-run with a unit of one's own:\n%s", out)
	}
	out, errs, code = e.run(t, "", "setup")
	if code != 0 || !strings.Contains(out, "service      updated       "+e.packagedUnit+", the package's unit") || !e.packagedOn || svcFileExists(own) {
		t.Errorf("setup with a unit of one's own exits %d, enabled the package's %v, left %s %v:\n%s\n%s", code, e.packagedOn, own, svcFileExists(own), out, errs)
	}
}
