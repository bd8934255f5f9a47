package main

import (
	"bytes"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/proc"
)

// TestAppsAndScreenshot: flyctl apps lists an app an IDE runs in a
// served workspace; flyctl screenshot saves a run's screen as a PNG, at
// the app's size or scaled down.
func TestAppsAndScreenshot(t *testing.T) {
	e := flytest.NewEnv(t)
	flutter := e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs, _ := mcpSession(t, e, root)

	ide := exec.Command(flutter, "run", "--machine", "-d", "linux")
	ide.Dir = root
	ide.Env = append(append([]string(nil), e.Vars...), fakeflutter.EnvDTD+"=1", fakeflutter.EnvTickMS+"=0", "DASH__IDE_NAME=Android Studio")
	stdin, _ := ide.StdinPipe()
	// In a group of its own, ended as a whole: on Windows flutter is a
	// batch file, and the app is cmd.exe's child.
	if err := proc.StartGroup(ide); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = proc.SignalGroup(ide.Process.Pid, proc.Kill)
		ide.Wait()
		proc.Release(ide.Process.Pid)
	})
	var out string
	flytest.Eventually(t, "the IDE's app in flyctl apps", func() bool {
		out, _, _ = flyctl(t, e.Getenv, "apps")
		return strings.Contains(out, "Android Studio")
	})
	if !strings.HasPrefix(out, "EXTERNAL APP") || !strings.Contains(out, "app-") || !strings.Contains(out, root) {
		t.Errorf("flyctl apps =\n%s", out)
	}

	id := startRun(t, cs)
	file := filepath.Join(t.TempDir(), "shot.png")
	_, errs, code := flyctl(t, e.Getenv, "screenshot", id, "-o", file)
	b, err := os.ReadFile(file)
	if code != 0 || err != nil || !strings.Contains(errs, "1080×2400") {
		t.Fatalf("flyctl screenshot: exit %d, %v, stderr %q", code, err, errs)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width != 1080 || cfg.Height != 2400 {
		t.Errorf("the screenshot = %+v, %v; want the app's 1080×2400", cfg, err)
	}
	small := mustFlyctl(t, e.Getenv, "screenshot", id, "--max-width", "270", "-o", "-")
	if cfg, err := png.DecodeConfig(strings.NewReader(small)); err != nil || cfg.Width != 270 {
		t.Errorf("--max-width 270 = %+v, %v", cfg, err)
	}
}
