package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
)

// ideRun starts the fake `flutter run --machine` in root as an IDE does,
// outside fly, with its Dart Tooling Daemon writing its file into e's
// DTD directory. The cleanup stops it (app.stop), which removes the file.
func ideRun(t *testing.T, e *flytest.Env, root string, vars ...string) *exec.Cmd {
	t.Helper()
	cmd, _ := ideRunIO(t, e, root, vars...)
	return cmd
}

// ideRunIO is ideRun that also gives the IDE's side of the app's stdin.
func ideRunIO(t *testing.T, e *flytest.Env, root string, vars ...string) (*exec.Cmd, io.Writer) {
	t.Helper()
	flutter := ""
	for _, v := range e.Vars { // the fake flutter e installed, as the IDE's PATH finds it
		if p, ok := strings.CutPrefix(v, "PATH="); ok {
			flutter = filepath.Join(strings.Split(p, string(os.PathListSeparator))[0], "flutter")
		}
	}
	cmd := exec.Command(flutter, "run", "--machine", "-d", "linux")
	cmd.Dir = root
	cmd.Env = append(append(append([]string(nil), e.Vars...), fakeflutter.EnvDTD+"=1", fakeflutter.EnvTickMS+"=0", "DASH__IDE_NAME=VS Code"), vars...)
	stdin, _ := cmd.StdinPipe()
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	flytest.Eventually(t, "the IDE's app to write its DTD file", func() bool {
		_, err := os.Stat(filepath.Join(e.DTDDir(), strconv.Itoa(cmd.Process.Pid)))
		return err == nil
	})
	return cmd, stdin
}

// TestAppsStartedElsewhere: apps an IDE started in a served workspace
// appear in runs_list (found through their DTD files) within a second,
// two as two with distinct stable ids, with the IDE's name; files for
// another workspace, of a dead process, through a symlink or naming a
// VM service off this machine are ignored; an app that ends goes away.
func TestAppsStartedElsewhere(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "agent", root, nil)

	dir := e.DTDDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	hostile := func(name string, v map[string]any) {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dead := exec.Command("true")
	dead.Run()
	other := t.TempDir()
	hostile("900001", map[string]any{"wsUri": "ws://127.0.0.1:1/x=", "pid": os.Getpid(), "workspaceRoot": other})     // not served
	hostile("900002", map[string]any{"wsUri": "ws://127.0.0.1:1/x=", "pid": dead.Process.Pid, "workspaceRoot": root}) // stale
	hostile("900003", map[string]any{"wsUri": "ws://10.9.8.7:8181/x=", "pid": os.Getpid(), "workspaceRoot": root})    // not loopback
	real := filepath.Join(t.TempDir(), "target")
	os.WriteFile(real, []byte(`{"wsUri":"ws://127.0.0.1:1/x=","pid":`+strconv.Itoa(os.Getpid())+`,"workspaceRoot":"`+root+`"}`), 0o600)
	os.Symlink(real, filepath.Join(dir, "900004")) // through a symlink

	first := ideRun(t, e, root)
	start := time.Now()
	var list mcpserver.RunsListResult
	apps := func() []wire.App {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		return list.Apps
	}
	flytest.Eventually(t, "the IDE's app in runs_list", func() bool { return len(apps()) == 1 })
	t.Logf("found in %s", time.Since(start))
	a := list.Apps[0]
	if !strings.HasPrefix(a.ID, "app-") || a.Name != "demo" || a.IDE != "VS Code" || a.Workspace != root || !strings.HasPrefix(a.VMServiceURI, "ws://127.0.0.1:") {
		t.Errorf("the app = %+v", a)
	}
	ideRun(t, e, root)
	flytest.Eventually(t, "two apps in one workspace", func() bool { return len(apps()) == 2 })
	if list.Apps[0].ID == list.Apps[1].ID {
		t.Errorf("two apps share the id %s", list.Apps[0].ID)
	}
	if ids := []string{list.Apps[0].ID, list.Apps[1].ID}; !strings.Contains(strings.Join(ids, " "), a.ID) {
		t.Errorf("the first app's id changed: %s, now %v", a.ID, ids)
	}
	// flyctl sees them too.
	st, err := getStatus(e)
	if err != nil || len(st.Apps) != 2 {
		t.Errorf("status apps = %+v, %v", st.Apps, err)
	}

	// The first app ends (its IDE stops it): it goes away.
	first.Process.Signal(os.Interrupt)
	first.Process.Kill()
	flytest.Eventually(t, "the ended app to go away", func() bool { return len(apps()) == 1 && apps()[0].ID != a.ID })
}

// TestAttachToAnIDEsApp: an agent attaches to an app its IDE runs: a hot
// reload goes through the service the IDE's flutter registered and tells
// the errors it caused; the errors reach flutter_errors; the run records
// who attached; stopping detaches and leaves the app running; an
// attached app that ends marks its run ended; stop_app ends the app.
func TestAttachToAnIDEsApp(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "claude-code", root, nil)
	ide := ideRun(t, e, root, fakeflutter.EnvErrorsOnReload+"=overflow", fakeflutter.EnvTickMS+"=50")
	var list mcpserver.RunsListResult
	flytest.Eventually(t, "the IDE's app", func() bool {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		return len(list.Apps) == 1
	})
	attach := func() mcpserver.RunResult {
		t.Helper()
		var run mcpserver.RunResult
		if res := callTool(t, cs, "flutter_run", map[string]any{"attach": list.Apps[0].ID}, &run); res.IsError {
			t.Fatalf("flutter_attach: %s", toolText(res))
		}
		return run
	}
	run := attach()
	var out mcpserver.RestartResult
	res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, &out)
	if text := toolText(res); res.IsError || !out.Applied || len(out.NewErrors) != 1 || out.NewErrors[0].Location != "lib/main.dart:30:12" {
		t.Errorf("a reload of the attached app = %+v\n%s", out, text)
	}
	// What the app prints reaches the run's log, from the VM's Stdout.
	flytest.Eventually(t, "the app's output in the attached run's log", func() bool {
		var page mcpserver.LogsReadResult
		callTool(t, cs, "logs_read", map[string]any{"run_id": run.RunID, "grep": "^tick [0-9]+$"}, &page)
		return page.Entries >= 3
	})
	var errs mcpserver.ErrorsResult
	callTool(t, cs, "flutter_errors", nil, &errs) // the attached app is the workspace's live run
	if errs.RunID != run.RunID || len(errs.Errors) != 1 {
		t.Errorf("flutter_errors = %+v", errs)
	}
	list = mcpserver.RunsListResult{}
	callTool(t, cs, "runs_list", nil, &list)
	if len(list.Runs) != 1 || list.Runs[0].Kind != "app" || list.Runs[0].StartedBy == nil || list.Runs[0].StartedBy.Client != "claude-code" {
		t.Errorf("runs_list = %+v", list.Runs)
	}

	// Stopping detaches: the app keeps running, and can be attached again.
	var stopped struct {
		State string `json:"state"`
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, &stopped)
	if stopped.State != "stopped" || ide.ProcessState != nil {
		t.Errorf("detach = %+v", stopped)
	}
	if err := ide.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the IDE's app did not survive the detach: %v", err)
	}
	again := attach()
	if again.RunID == run.RunID {
		t.Errorf("attaching again gave the ended run %s", run.RunID)
	}
	// The app ends: its attached run ends with it.
	ide.Process.Kill()
	flytest.Eventually(t, "the attached run to end with its app", func() bool {
		var r struct {
			Runs []wire.Run `json:"runs"`
		}
		callTool(t, cs, "runs_list", nil, &r)
		for _, x := range r.Runs {
			if x.RunID == again.RunID {
				return x.State == "exited"
			}
		}
		return false
	})

	// stop_app ends an app fly did not start.
	other := ideRun(t, e, root)
	flytest.Eventually(t, "the second app", func() bool {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		return len(list.Apps) == 1
	})
	third := attach()
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": third.RunID, "stop_app": true}, nil)
	done := make(chan error, 1)
	go func() { done <- other.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("stop_app left the app running")
	}
}

// TestReloadThroughFlutterAttach: the IDE detaches from its app (its
// tool, services and DTD go; the app runs on); a reload of the attached
// run then goes through a flutter attach flyd starts, and tells the
// error it caused; stopping the attached run stops that flutter attach
// and leaves the app running.
func TestReloadThroughFlutterAttach(t *testing.T) {
	t.Parallel() // its own flyd
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	fl := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs := viaShim(e)(t, "agent", root, nil)
	ide, ideIn := ideRunIO(t, e, root, fakeflutter.EnvErrorsOnReload+"=overflow", fakeflutter.EnvAppID+"=ide-app")
	var list mcpserver.RunsListResult
	flytest.Eventually(t, "the IDE's app", func() bool {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		return len(list.Apps) == 1
	})
	var run mcpserver.RunResult
	if res := callTool(t, cs, "flutter_attach", map[string]any{"app_id": list.Apps[0].ID}, &run); res.IsError {
		t.Fatalf("flutter_attach: %s", toolText(res))
	}
	io.WriteString(ideIn, `[{"id":1,"method":"app.detach","params":{"appId":"ide-app"}}]`+"\n")
	flytest.Eventually(t, "the IDE's tool to go (its DTD with it)", func() bool {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		return len(list.Apps) == 0
	})

	var out mcpserver.RestartResult
	res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, &out)
	if text := toolText(res); res.IsError || !out.Applied || len(out.NewErrors) != 1 || out.NewErrors[0].Location != "lib/main.dart:30:12" {
		t.Fatalf("a reload with the IDE gone = %+v\n%s\n%s", out, text, fl.Stderr)
	}
	list = mcpserver.RunsListResult{}
	callTool(t, cs, "runs_list", nil, &list)
	var helper *wire.Run
	for i, r := range list.Runs {
		if r.Kind == "attach" {
			helper = &list.Runs[i]
		}
	}
	if helper == nil || helper.State != "running" || !strings.Contains(strings.Join(helper.Argv, " "), "attach --machine --debug-uri http://127.0.0.1:") {
		t.Fatalf("runs_list = %+v, want a live flutter attach", list.Runs)
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": run.RunID}, nil)
	flytest.Eventually(t, "the flutter attach to stop with the attached run", func() bool {
		list = mcpserver.RunsListResult{}
		callTool(t, cs, "runs_list", nil, &list)
		for _, r := range list.Runs {
			if r.RunID == helper.RunID {
				return !r.Live()
			}
		}
		return false
	})
	if err := ide.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the app did not survive: %v", err)
	}

	// Attached again by its VM-service URI, reloaded through a new flutter
	// attach: flyd's stop leaves nothing of its own running, and the app
	// runs on.
	if res := callTool(t, cs, "flutter_run", map[string]any{"attach": run.VMServiceURI}, &run); res.IsError {
		t.Fatalf("flutter_attach by URI: %s", toolText(res))
	}
	if res := callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, &out); res.IsError || !out.Applied {
		t.Fatalf("the second reload = %+v: %s", out, toolText(res))
	}
	list = mcpserver.RunsListResult{}
	callTool(t, cs, "runs_list", nil, &list)
	pid := 0
	for _, r := range list.Runs {
		if r.Kind == "attach" && r.Live() {
			pid = r.PID
		}
	}
	if pid == 0 {
		t.Fatalf("no live flutter attach: %+v", list.Runs)
	}
	cs.Close()
	fl.Stop(t)
	if flytest.Exists(pid) {
		t.Errorf("flutter attach (pid %d) outlived flyd", pid)
	}
	if err := ide.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the app did not survive flyd's stop: %v", err)
	}
}
