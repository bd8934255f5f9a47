package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeSystemctl answers as a machine where users 1000 and 1001 are logged
// in: 1000 runs this package's flyd.service, 1001 a unit of their own
// (flyctl service install's). It logs each command line to $SYSTEMCTL_LOG.
const fakeSystemctl = `#!/bin/sh
echo "$*" >> "$SYSTEMCTL_LOG"
case "$*" in
list-units*) printf '%s\n' 'user@1000.service loaded active running User Manager for UID 1000' 'user@1001.service loaded active running User Manager for UID 1001' ;;
"--user -M 1000@ show"*) echo /usr/lib/systemd/user/flyd.service ;;
"--user -M 1001@ show"*) echo /home/b/.config/systemd/user/flyd.service ;;
esac
`

// TestMaintainerScripts: what the deb's and rpm's scripts ask systemd, on
// install, upgrade and removal, with dpkg's and rpm's arguments. Removal
// stops and disables only the packaged unit; an upgrade restarts only it;
// nothing enables flyd for anyone.
func TestMaintainerScripts(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run the maintainer scripts with")
	}
	const (
		list      = "list-units user@*.service --no-legend --plain"
		show1000  = "--user -M 1000@ show --property=FragmentPath --value flyd.service"
		show1001  = "--user -M 1001@ show --property=FragmentPath --value flyd.service"
		reload    = "--user -M %s@ daemon-reload"
		restart   = "--user -M 1000@ try-restart flyd.service"
		stopOurs  = "--user -M 1000@ disable --now flyd.service"
		killOurs  = "--user -M 1000@ kill --kill-whom=all flyd.service" // the runs' holders too
		globalOff = "--global disable flyd.service"
	)
	reloads := []string{strings.Replace(reload, "%s", "1000", 1), strings.Replace(reload, "%s", "1001", 1)}
	removal := []string{globalOff, list, show1000, show1001, killOurs, stopOurs}
	for _, tc := range []struct {
		script string
		args   []string
		want   []string
	}{
		{"postinstall.sh", []string{"configure", ""}, append([]string{list}, reloads...)},
		{"postinstall.sh", []string{"configure", "1.2.2"}, append([]string{list, show1000, show1001, restart}, reloads...)},
		{"postinstall.sh", []string{"abort-upgrade", "1.2.3"}, nil},
		{"postinstall.sh", []string{"1"}, append([]string{list}, reloads...)},
		{"postinstall.sh", []string{"2"}, append([]string{list, show1000, show1001, restart}, reloads...)},
		{"preremove.sh", []string{"remove"}, removal},
		{"preremove.sh", []string{"0"}, removal},
		{"preremove.sh", []string{"upgrade", "1.2.4"}, nil},
		{"preremove.sh", []string{"1"}, nil},
		{"postremove.sh", []string{"remove"}, append([]string{list}, reloads...)},
		{"postremove.sh", []string{"purge"}, append([]string{list}, reloads...)},
		{"postremove.sh", []string{"0"}, append([]string{list}, reloads...)},
		{"postremove.sh", []string{"upgrade", "1.2.4"}, nil},
		{"postremove.sh", []string{"1"}, nil},
	} {
		t.Run(tc.script+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(fakeSystemctl), 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "log")
			cmd := exec.Command(sh, append([]string{filepath.Join("nfpm", tc.script)}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "SYSTEMCTL_LOG="+log)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %q = %v, want exit 0\n%s", tc.script, tc.args, err, out)
			}
			b, _ := os.ReadFile(log)
			got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(b) == 0 {
				got = nil
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s %q ran systemctl\n  %s\nwant\n  %s", tc.script, tc.args, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			for _, line := range got {
				if strings.Contains(line, "enable") && !strings.Contains(line, "disable") {
					t.Errorf("%s %q enabled a unit: systemctl %s", tc.script, tc.args, line)
				}
			}
		})
	}

	// With a systemctl that fails at everything but listing the users, every
	// script still succeeds, having tried.
	failing := "#!/bin/sh\necho \"$*\" >> \"$SYSTEMCTL_LOG\"\ncase \"$*\" in list-units*) echo 'user@1000.service loaded active running x' ;; *) exit 1 ;; esac\n"
	for _, run := range [][]string{{"postinstall.sh", "configure", "1.2.2"}, {"preremove.sh", "remove"}, {"postremove.sh", "remove"}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(failing), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sh, append([]string{filepath.Join("nfpm", run[0])}, run[1:]...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "SYSTEMCTL_LOG="+filepath.Join(dir, "log"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%q with a failing systemctl = %v, want exit 0\n%s", run, err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "log")); !strings.Contains(string(b), "1000@") {
			t.Errorf("%q with a failing systemctl did not try user 1000's manager:\n%s", run, b)
		}
	}

	// Without systemctl (a container), every script just succeeds.
	for _, script := range []string{"postinstall.sh", "preremove.sh", "postremove.sh"} {
		cmd := exec.Command(sh, filepath.Join("nfpm", script), "remove")
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s remove without systemctl = %v, want exit 0\n%s", script, err, out)
		}
	}
}
