package packaging

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite nfpm/flyd.service from the template")

// packagedUnitHeader replaces the template's opening comment in the unit
// the deb and rpm packages install for every user.
const packagedUnitHeader = `# flyd, fly's per-user daemon, as a systemd user service. The fly-flutter
# package installs it for every user and enables it for none: a user starts
# it at login with "flyctl setup" or "flyctl service install", which enable
# this unit and write none of their own, or with
#   systemctl --user enable --now flyd
# Its log is in the journal: journalctl --user -u flyd
# Removing the package stops and disables it in every running user manager.
# A user's own ~/.config/systemd/user/flyd.service (which flyctl service
# install writes for a flyd that is not this package's) overrides this file.
`

// packagedUnit is the systemd template filled in as README.md's "Shipping
// a distro user unit" says: flyd at /usr/bin/flyd, no environment.
func packagedUnit() string {
	var b strings.Builder
	b.WriteString(packagedUnitHeader)
	header := true
	for line := range strings.Lines(SystemdUnit) {
		if header && strings.HasPrefix(line, "#") {
			continue
		}
		header = false
		if strings.TrimSpace(line) == "@ENVIRONMENT@" {
			continue
		}
		b.WriteString(strings.ReplaceAll(line, "@FLYD@", "/usr/bin/flyd"))
	}
	return b.String()
}

// TestPackagedUnit: nfpm/flyd.service, which the deb and rpm install as
// /usr/lib/systemd/user/flyd.service, is the template filled in for
// /usr/bin/flyd (go test -update rewrites it), a user unit that runs
// "flyd run" at login once enabled, and one systemd accepts.
func TestPackagedUnit(t *testing.T) {
	want := packagedUnit()
	const file = "nfpm/flyd.service"
	if *update {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the template filled in for /usr/bin/flyd (go test ./packaging -update rewrites it)\n--- got\n%s\n--- want\n%s", file, got, want)
	}
	for _, line := range []string{"ExecStart=/usr/bin/flyd run\n", "WantedBy=default.target\n", "KillMode=process\n"} {
		if !strings.Contains(want, line) {
			t.Errorf("%s has no line %q", file, line)
		}
	}
	if strings.Contains(want, "@") {
		t.Errorf("%s keeps a placeholder:\n%s", file, want)
	}

	// systemd's own check, where systemd-analyze is: it wants ExecStart's
	// binary to exist, so the copy it checks runs an executable of this
	// test's.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit's syntax is not checked by systemd")
	}
	dir := t.TempDir()
	flyd := filepath.Join(dir, "flyd")
	if err := os.WriteFile(flyd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "flyd.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(want, "/usr/bin/flyd", flyd)), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime := filepath.Join(dir, "runtime")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--user", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify --user %s = %v\n%s", file, err, out)
	}
}
