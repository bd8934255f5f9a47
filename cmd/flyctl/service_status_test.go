package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
