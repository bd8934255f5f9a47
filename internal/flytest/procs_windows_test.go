package flytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/wine"
)

// TestStartHung: a run's cmd.exe with no fake flutter under it is a start
// that Wine never made (and only under Wine is it taken for one); one
// whose fake flutter runs is not.
func TestStartHung(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fakeflutter.WindowsExe), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script string
		fake         bool // the fake's program runs under it
	}{
		{"waiting for nothing", "@echo off\r\npause >NUL\r\n", false},
		{"its flutter runs", "@echo off\r\n\"%~dp0" + fakeflutter.WindowsExe + "\"\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bat := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".bat")
			if err := os.WriteFile(bat, []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("cmd.exe", "/c", bat)
			cmd.Env = append(os.Environ(), envReadStdin+"=1")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				in.Close()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}()
			var procs []string
			Eventually(t, "the bat file's processes", func() bool {
				procs = descendants(cmd.Process.Pid)
				return strings.HasSuffix(procs[0], " cmd.exe") &&
					(!tc.fake || slices.ContainsFunc(procs, func(p string) bool {
						return strings.HasSuffix(p, " "+fakeflutter.WindowsExe)
					}))
			})
			if want := !tc.fake && wine.Detected(); startHung(procs) != want {
				t.Errorf("startHung(%q) = %v, want %v", procs, !want, want)
			}
		})
	}
}
