package fakeflutter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/vmservice"
)

var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	wsURI  = regexp.MustCompile(`^ws://127\.0\.0\.1:(\d+)/[A-Za-z0-9_-]{11}=/ws$`)
	dtdURI = regexp.MustCompile(`^ws://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{11}=$`)
)

func TestRunTranscript(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "0"}, "-d", "emulator-5554")
	s.event("app.started")
	lines := s.seen

	first, ok := decode(lines[0])
	if !ok || first.Event != "daemon.connected" || first.Params["version"] != "0.6.1" || first.Params["pid"] != float64(os.Getpid()) {
		t.Errorf("first line = %s, want daemon.connected {0.6.1, pid}", lines[0])
	}
	start, _ := decode(lines[index(lines, isEvent("app.start"))])
	cwd, _ := os.Getwd()
	want := map[string]any{
		"appId": testAppID, "deviceId": "emulator-5554", "directory": cwd,
		"supportsRestart": true, "launchMode": "run", "mode": "debug",
	}
	if fmt.Sprint(start.Params) != fmt.Sprint(want) {
		t.Errorf("app.start params = %v, want %v", start.Params, want)
	}
	for _, text := range []string{
		"Launching lib/main.dart on sdk gphone64 x86 64 in debug mode...",
		"✓ Built build/app/outputs/flutter-apk/app-debug.apk",
	} {
		if index(lines, func(l string) bool { return l == text }) < 0 {
			t.Errorf("missing plain line %q in:\n%s", text, strings.Join(lines, "\n"))
		}
	}
	// Progress: every started id finishes, and the Gradle task is one.
	open := map[string]string{}
	sawGradle := false
	for _, l := range lines {
		m, ok := decode(l)
		if !ok || m.Event != "app.progress" {
			continue
		}
		id := m.Params["id"].(string)
		if m.Params["finished"] == true {
			if _, ok := open[id]; !ok {
				t.Errorf("progress %s finished but never started", id)
			}
			if _, has := m.Params["message"]; has {
				t.Errorf("finished progress carries a message: %s", l)
			}
			delete(open, id)
			continue
		}
		if m.Params["progressId"] != nil {
			t.Errorf("launch progress has progressId: %s", l)
		}
		open[id] = m.Params["message"].(string)
		sawGradle = sawGradle || m.Params["message"] == "Running Gradle task 'assembleDebug'..."
	}
	if len(open) > 0 || !sawGradle {
		t.Errorf("progress unfinished %v, saw Gradle %v", open, sawGradle)
	}
	dp := index(lines, isEvent("app.debugPort"))
	started := index(lines, isEvent("app.started"))
	if dp < 0 || dp > started || index(lines, isEvent("app.dtd")) > started {
		t.Errorf("app.debugPort at %d, app.dtd at %d, app.started at %d: want both before started",
			dp, index(lines, isEvent("app.dtd")), started)
	}
	debugPort, _ := decode(lines[dp])
	ws, _ := debugPort.Params["wsUri"].(string)
	if m := wsURI.FindStringSubmatch(ws); m == nil || m[1] != fmt.Sprint(debugPort.Params["port"]) {
		t.Errorf("app.debugPort = %v, want a ws URI with its port", debugPort.Params)
	}
	dtd, _ := decode(lines[index(lines, isEvent("app.dtd"))])
	if uri, _ := dtd.Params["uri"].(string); !dtdURI.MatchString(uri) || dtd.Params["appId"] != testAppID {
		t.Errorf("app.dtd = %v", dtd.Params)
	}

	// Hot reload.
	s.send(`[{"id":1,"method":"app.restart","params":{"appId":"` + testAppID + `","fullRestart":false,"reason":"manual","debounce":true}}]`)
	before := len(s.seen)
	r := s.reply("1")
	got := s.seen[before:]
	if string(r.Result) != `{"code":0,"message":"Reloaded 1 of 812 libraries"}` {
		t.Errorf("reload result = %s", r.Result)
	}
	assertReloadTranscript(t, got, "hot.reload", "Performing hot reload...",
		"Reloaded 1 of 812 libraries in 412ms (compile: 35 ms, reload: 160 ms, reassemble: 170 ms).")

	// Hot restart, with a string id.
	s.send(`[{"id":"two","method":"app.restart","params":{"appId":"` + testAppID + `","fullRestart":true}}]`)
	before = len(s.seen)
	r = s.reply(`"two"`)
	if string(r.Result) != `{"code":0,"message":""}` {
		t.Errorf("restart result = %s", r.Result)
	}
	assertReloadTranscript(t, s.seen[before:], "hot.restart", "Performing hot restart...", "Restarted application in 1,034ms.")

	// Stop.
	s.send(`[{"id":4,"method":"app.stop","params":{"appId":"` + testAppID + `"}}]`)
	code, rest := s.wait()
	if code != 0 {
		t.Errorf("exit code after app.stop = %d, want 0", code)
	}
	if index(rest, func(l string) bool { return l == `[{"event":"app.stop","params":{"appId":"`+testAppID+`"}}]` }) < 0 ||
		index(rest, func(l string) bool { return l == `[{"id":4,"result":true}]` }) < 0 {
		t.Errorf("after app.stop got:\n%s", strings.Join(rest, "\n"))
	}
}

func assertReloadTranscript(t *testing.T, lines []string, progressID, message, plain string) {
	t.Helper()
	begin := index(lines, func(l string) bool {
		m, ok := decode(l)
		return ok && m.Event == "app.progress" && m.Params["progressId"] == progressID && m.Params["message"] == message &&
			m.Params["finished"] == false
	})
	text := index(lines, func(l string) bool { return l == plain })
	end := index(lines, func(l string) bool {
		m, ok := decode(l)
		return ok && m.Event == "app.progress" && m.Params["progressId"] == progressID && m.Params["finished"] == true
	})
	if begin < 0 || text < begin || end < text || end != len(lines)-2 {
		t.Errorf("%s transcript: progress start %d, %q %d, finish %d, in:\n%s", progressID, begin, plain, text, end,
			strings.Join(lines, "\n"))
	}
}

func TestRunAppIDIsUUIDv4(t *testing.T) {
	s := startRun(t, map[string]string{EnvTickMS: "0"})
	start := s.event("app.start")
	if id, _ := start.Params["appId"].(string); !uuidV4.MatchString(id) {
		t.Errorf("appId = %q, want a UUID v4", id)
	}
}

func TestRunErrors(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "0"})
	s.event("app.started")
	tests := []struct {
		req, id, wantError, wantResult string
	}{
		{`[{"id":3,"method":"app.restart","params":{"appId":"nope"}}]`, "3", "app 'nope' not found", ""},
		{`[{"id":5,"method":"app.stop","params":{"appId":"nope"}}]`, "5", "app 'nope' not found", ""},
		{`[{"id":6,"method":"app.foo","params":{}}]`, "6", "command not understood: app.foo", ""},
		{`[{"id":7,"method":"x.y"}]`, "7", "no domain for method: x.y", ""},
		{`[{"id":8,"method":"frob"}]`, "8", "method not understood: frob", ""},
		{`[{"id":9,"method":"app.restart"}]`, "9", "appId is required", ""},
		{`[{"id":10,"method":"app.restart","params":{"fullRestart":true}}]`, "10", "appId is required", ""},
		{`[{"id":11,"method":"app.restart","params":{"appId":5}}]`, "11", "appId is not a String", ""},
		{`[{"id":12,"method":"app.restart","params":{"appId":"` + testAppID + `","fullRestart":"yes"}}]`, "12",
			"fullRestart is not a bool", ""},
		{`[{"id":13,"method":"device.getDevices"}]`, "13", "command not understood: device.getDevices", ""},
		{`[{"id":14,"method":"daemon.version"}]`, "14", "", `"0.6.1"`},
		{`[{"id":15,"method":"app.callServiceExtension","params":{"appId":"` + testAppID +
			`","methodName":"ext.flutter.debugPaint","params":{"enabled":true}}}]`, "15", "",
			`{"enabled":true,"method":"ext.flutter.debugPaint","type":"_extensionType"}`},
		{`[{"id":16,"method":"app.callServiceExtension","params":{"appId":"` + testAppID + `"}}]`, "16",
			"methodName is required", ""},
		{`[{"id":{"k":1},"method":"daemon.version"}]`, `{"k":1}`, "", `"0.6.1"`},
	}
	for _, tt := range tests {
		s.send(tt.req)
		r := s.reply(tt.id)
		if r.Error != tt.wantError || string(r.Result) != tt.wantResult {
			t.Errorf("%s -> error %q result %s, want error %q result %s", tt.req, r.Error, r.Result, tt.wantError, tt.wantResult)
		}
		if tt.wantError != "" && !strings.HasPrefix(r.Trace, "#0      ") {
			t.Errorf("%s -> trace %q, want a Dart stack", tt.req, r.Trace)
		}
	}

	// No id: a line on stderr and no reply. Unframed and undecodable input
	// gets nothing either; the next reply is for the next request.
	s.send(`[{"method":"app.restart","params":{"appId":"x"}}]`)
	s.send(`[{"id":null,"method":"daemon.version"}]`)
	s.send(`{"id":20,"method":"daemon.version"}`)
	s.send(`hello`)
	s.send(`[{"id":21,"method":}]`)
	s.send(`[{"id":22,"method":"daemon.version"}]`)
	before := len(s.seen)
	s.reply("22")
	for _, l := range s.seen[before:] {
		if m, ok := decode(l); ok && m.Event == "" {
			if string(m.ID) != "22" {
				t.Errorf("unexpected reply %s", l)
			}
		}
	}
	if got := s.stderr.String(); !strings.Contains(got, `no id for request: {"method":"app.restart","params":{"appId":"x"}}`+"\n") ||
		strings.Count(got, "no id for request: ") != 2 {
		t.Errorf("stderr = %q, want two no-id lines", got)
	}
}

func TestRunWrongAppID(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvWrongAppID: "1", EnvTickMS: "0"})
	s.event("app.started")
	for i, method := range []string{"app.restart", "app.stop"} {
		id := strconv.Itoa(i + 1)
		s.send(`[{"id":` + id + `,"method":"` + method + `","params":{"appId":"` + testAppID + `"}}]`)
		if r := s.reply(id); r.Error != "app '"+testAppID+"' not found" {
			t.Errorf("%s with the reported id -> %+v, want not found", method, r)
		}
	}
}

// TestRunOutlivesItsDaemonConnection: as in the real tool (the
// reference's §6.2), neither daemon.shutdown nor the end of stdin stops
// the app under run --machine: it keeps running (and printing) until it
// is stopped another way.
func TestRunOutlivesItsDaemonConnection(t *testing.T) {
	for _, how := range []string{"daemon.shutdown", "stdin EOF"} {
		t.Run(how, func(t *testing.T) {
			s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "20"})
			s.event("app.started")
			if how == "stdin EOF" {
				s.in.Close()
			} else {
				s.send(`[{"id":9,"method":"daemon.shutdown"}]`)
				s.reply("9")
			}
			for range 3 { // the app still runs: three more ticks
				s.next("a tick after "+how, isEvent("app.log"))
			}
			if slices.ContainsFunc(s.seen, isEvent("app.stop")) {
				t.Errorf("%s stopped the app", how)
			}
		})
	}
}

func TestRunBuildFail(t *testing.T) {
	for _, tt := range []struct{ device, stopError string }{
		{"emulator-5554", "Gradle task assembleDebug failed with exit code 1"},
		{"linux", "Build process failed"},
		{"chrome", "Failed to compile application for the Web."},
	} {
		t.Run(tt.device, func(t *testing.T) {
			s := startRun(t, map[string]string{EnvAppID: testAppID, EnvBuildFail: "1"}, "-d", tt.device)
			stop := s.event("app.stop")
			code, _ := s.wait()
			if code != 1 {
				t.Errorf("exit code = %d, want 1", code)
			}
			if stop.Params["appId"] != testAppID || stop.Params["error"] != tt.stopError || stop.Params["trace"] == "" {
				t.Errorf("app.stop = %v, want error %q and a trace", stop.Params, tt.stopError)
			}
			if index(s.seen, isEvent("app.started")) >= 0 || index(s.seen, isEvent("app.debugPort")) >= 0 {
				t.Errorf("a failed build reported the app started:\n%s", strings.Join(s.seen, "\n"))
			}
			if got := s.stderr.String(); !strings.HasPrefix(got, "lib/main.dart:12:3: Error: Expected ';' after this.\n") {
				t.Errorf("stderr = %q, want the compile error", got)
			}
		})
	}
}

func TestRunCrash(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "5", EnvCrashAfter: "3"})
	s.event("app.started")
	code, rest := s.wait()
	if code != CrashExitCode {
		t.Errorf("exit code = %d, want %d", code, CrashExitCode)
	}
	var logs []string
	for _, l := range rest {
		if m, ok := decode(l); ok && m.Event == "app.log" {
			logs = append(logs, m.Params["log"].(string))
			if len(logs) == 4 && m.Params["error"] != true {
				t.Errorf("crash log = %s, want error:true", l)
			}
		}
	}
	if len(logs) != 4 || logs[0] != "flutter: tick 1" || logs[2] != "flutter: tick 3" {
		t.Errorf("logs = %q, want 3 ticks and the crash", logs)
	}
	if index(rest, isEvent("app.stop")) >= 0 || rest[len(rest)-1] != "Lost connection to device." {
		t.Errorf("crash output:\n%s", strings.Join(rest, "\n"))
	}
}

func TestRunCrashQuiet(t *testing.T) {
	s := startRun(t, map[string]string{EnvTickMS: "0", EnvCrashAfter: "0"})
	s.event("app.started")
	if code, _ := s.wait(); code != CrashExitCode {
		t.Errorf("exit code = %d, want %d", code, CrashExitCode)
	}
}

func TestRunFlood(t *testing.T) {
	const n = 50000
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvLinesPerSec: "0", EnvLines: strconv.Itoa(n)})
	s.event("app.started")
	for i := 1; i <= n; i++ {
		want := `[{"event":"app.log","params":{"appId":"` + testAppID + `","log":"flutter: tick ` + strconv.Itoa(i) + `"}}]`
		select {
		case l := <-s.lines:
			if !strings.Contains(l, `"app.log"`) {
				i--
				continue
			}
			if l != want {
				t.Fatalf("line %d = %s, want %s", i, l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out after %d lines", i-1)
		}
	}
	// Then idle, still answering.
	select {
	case l := <-s.lines:
		t.Errorf("line after the bound: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	s.send(`[{"id":1,"method":"app.stop","params":{"appId":"` + testAppID + `"}}]`)
	if code, _ := s.wait(); code != 0 {
		t.Errorf("exit code = %d", code)
	}
}

func TestRunRate(t *testing.T) {
	s := startRun(t, map[string]string{EnvLinesPerSec: "200", EnvLines: "20", EnvStamp: "1"})
	s.event("app.started")
	var first, last int64
	for i := 1; i <= 20; i++ {
		l := s.next("tick", isEvent("app.log"))
		m, _ := decode(l)
		log := m.Params["log"].(string)
		prefix := fmt.Sprintf("flutter: tick %d at=", i)
		at, err := strconv.ParseInt(strings.TrimPrefix(log, prefix), 10, 64)
		if !strings.HasPrefix(log, prefix) || err != nil {
			t.Fatalf("log = %q, want %q<nanos>", log, prefix)
		}
		if i == 1 {
			first = at
		}
		last = at
	}
	// 19 intervals of 5 ms; only the lower bound is checked.
	if d := time.Duration(last - first); d < 90*time.Millisecond {
		t.Errorf("20 lines at 200/s took %v, want >= 95ms", d)
	}
}

func TestRunDevicesAndModes(t *testing.T) {
	t.Run("linux", func(t *testing.T) {
		s := startRun(t, map[string]string{EnvTickMS: "0"}, "-d", "linux")
		if start := s.event("app.start"); start.Params["deviceId"] != "linux" {
			t.Errorf("deviceId = %v", start.Params["deviceId"])
		}
		s.next("built", func(l string) bool { return strings.HasPrefix(l, "✓ Built build/linux/x64/debug/bundle/") })
		s.event("app.started")
	})
	t.Run("chrome", func(t *testing.T) {
		s := startRun(t, map[string]string{EnvTickMS: "0"}, "--device-id=chrome")
		web := s.event("app.webLaunchUrl")
		if web.Params["launched"] != true || !strings.HasPrefix(web.Params["url"].(string), "http://localhost:") {
			t.Errorf("app.webLaunchUrl = %v", web.Params)
		}
		s.event("app.started")
	})
	t.Run("release", func(t *testing.T) {
		s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "0"}, "--release", "-d", "linux")
		start := s.event("app.start")
		if start.Params["mode"] != "release" || start.Params["supportsRestart"] != false {
			t.Errorf("app.start = %v", start.Params)
		}
		s.event("app.started")
		if index(s.seen, isEvent("app.debugPort")) >= 0 {
			t.Errorf("release run sent app.debugPort")
		}
		s.send(`[{"id":1,"method":"app.restart","params":{"appId":"` + testAppID + `"}}]`)
		if r := s.reply("1"); r.Error != "Exception: Reload is not supported in release mode" {
			t.Errorf("restart in release -> %+v", r)
		}
	})
	t.Run("target", func(t *testing.T) {
		s := startRun(t, map[string]string{EnvTickMS: "0"}, "lib/main_dev.dart", "-d", "linux")
		s.next("launching", func(l string) bool { return l == "Launching lib/main_dev.dart on Linux in debug mode..." })
		s.event("app.started")
	})
	t.Run("flavor", func(t *testing.T) {
		s := startRun(t, map[string]string{EnvTickMS: "0"}, "--flavor", "dev", "--profile")
		s.next("built", func(l string) bool { return l == "✓ Built build/app/outputs/flutter-apk/app-dev-profile.apk" })
		s.event("app.debugPort")
		s.event("app.started")
	})
}

func TestRunNoDevice(t *testing.T) {
	for _, tt := range []struct {
		vars   map[string]string
		args   []string
		stderr string
	}{
		{nil, []string{"-d", "nosuch"}, "No supported devices found with name or id matching 'nosuch'.\n"},
		{map[string]string{EnvNoDevices: "true"}, nil, "No supported devices connected.\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"run", "--machine"}, tt.args...), getenv(tt.vars), nil, &stdout, &stderr)
		if code != 1 || stderr.String() != tt.stderr || stdout.Len() != 0 {
			t.Errorf("run %v = %d, stdout %q, stderr %q; want 1, nothing, %q", tt.args, code, stdout.String(), stderr.String(), tt.stderr)
		}
	}
}

func TestRunStartupDelay(t *testing.T) {
	s := startRun(t, map[string]string{EnvStartupMS: "300", EnvTickMS: "0"})
	s.event("app.start")
	t0 := time.Now()
	s.event("app.started")
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("app.started %v after app.start, want >= 300ms", d)
	}
}

func TestRunDefaultIsQuick(t *testing.T) {
	t0 := time.Now()
	s := startRun(t, nil)
	s.event("app.started")
	if d := time.Since(t0); d > time.Second { // ~60 ms in practice; generous for -race on a loaded machine
		t.Errorf("app.started after %v", d)
	}
	l := s.next("tick", isEvent("app.log"))
	if m, _ := decode(l); m.Params["log"] != "flutter: tick 1" {
		t.Errorf("first log = %s", l)
	}
}

func TestRunReloadFail(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "0", EnvReloadFail: "1"})
	s.event("app.started")
	s.send(`[{"id":1,"method":"app.restart","params":{"appId":"` + testAppID + `"}}]`)
	r := s.reply("1")
	if string(r.Result) != `{"code":1,"message":"Try again after fixing the above error(s)."}` {
		t.Errorf("result = %s", r.Result)
	}
	if !strings.Contains(s.stderr.String(), "Error: Expected ';' after this.") {
		t.Errorf("stderr = %q", s.stderr.String())
	}
}

// TestRunDetach: app.detach answers, says app.stop, and the tool goes
// (its services and DDS with it) while the app runs on: its VM service
// still answers at the same address, without flutter_tools' reload
// services, and it reloads through the VM's own reloadSources as a
// flutter attach would ask.
func TestRunDetach(t *testing.T) {
	s := startRun(t, map[string]string{EnvAppID: testAppID, EnvTickMS: "0"})
	ws, _ := s.event("app.debugPort").Params["wsUri"].(string)
	s.event("app.started")
	s.send(`[{"id":1,"method":"app.detach","params":{"appId":"` + testAppID + `"}}]`)
	s.event("app.stop")
	if r := s.reply("1"); string(r.Result) != "true" {
		t.Errorf("detach = %s", r.Result)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := vmservice.Dial(ctx, ws, vmservice.Options{})
	if err != nil {
		t.Fatalf("the app's VM service is gone after a detach: %v", err)
	}
	defer c.Close()
	var vm struct{ Isolates []vmservice.IsolateRef }
	if err := c.Call(ctx, "getVM", nil, &vm); err != nil || len(vm.Isolates) != 1 {
		t.Fatalf("getVM after a detach = %+v, %v", vm, err)
	}
	var e *vmservice.Error
	if err := c.Call(ctx, "s0.reloadSources", map[string]any{"isolateId": vm.Isolates[0].ID}, nil); !errors.As(err, &e) || e.Code != vmservice.CodeMethodNotFound {
		t.Errorf("s0.reloadSources after the tool left = %v, want -32601", err)
	}
	var rep struct{ Success bool }
	if err := c.Call(ctx, "reloadSources", map[string]any{"isolateId": vm.Isolates[0].ID}, &rep); err != nil || !rep.Success {
		t.Errorf("the VM's reloadSources = %+v, %v", rep, err)
	}
}
