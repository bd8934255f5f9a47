package fakeflutter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/vmservice"
)

// TestMain lets the test binary act as the fake flutter when re-executed
// through Install (see the package comment).
func TestMain(m *testing.M) {
	if os.Getenv("FLY_TEST_HELPER") == "flutter" {
		os.Exit(Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const testAppID = "3c0f5c1e-5b6a-4f2e-9a57-2f8d3b1c9e10"

var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	wsURI  = regexp.MustCompile(`^ws://127\.0\.0\.1:(\d+)/[A-Za-z0-9_-]{11}=/ws$`)
	dtdURI = regexp.MustCompile(`^ws://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{11}=$`)
)

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// msg is one decoded protocol line.
type msg struct {
	Event  string          `json:"event"`
	Params map[string]any  `json:"params"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Trace  string          `json:"trace"`
}

func decode(line string) (msg, bool) {
	var m msg
	if !strings.HasPrefix(line, "[{") || !strings.HasSuffix(line, "}]") {
		return m, false
	}
	if err := json.Unmarshal([]byte(line[1:len(line)-1]), &m); err != nil {
		return m, false
	}
	return m, true
}

// session is one in-process `flutter run --machine`.
type session struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan string
	stderr *syncBuffer
	code   chan int
	seen   []string // every stdout line read so far
	exited bool
}

// startRun starts Main("run --machine" args...) with pipes. The cleanup
// shuts the app down if the test did not, and waits for every goroutine.
func startRun(t *testing.T, vars map[string]string, args ...string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, lines: make(chan string, 1<<17), stderr: &syncBuffer{}, code: make(chan int, 1)}
	kill := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.code <- mainKillable(kill, append([]string{"run", "--machine"}, args...), getenv(vars), inR, outW, s.stderr)
		outW.Close()
	}()
	go func() {
		defer wg.Done()
		defer close(s.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				s.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if !s.exited {
			close(kill) // neither stdin EOF nor daemon.shutdown stops an app
			go func() {
				for range s.lines {
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("fake flutter did not exit")
		}
		inW.Close()
	})
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write request: %v", err)
	}
}

// next returns the next stdout line that satisfies match.
func (s *session) next(what string, match func(string) bool) string {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout ended waiting for %s; stderr:\n%s", what, s.stderr)
			}
			s.seen = append(s.seen, line)
			if match(line) {
				return line
			}
		case <-timeout:
			s.t.Fatalf("timed out waiting for %s; seen:\n%s", what, strings.Join(s.seen, "\n"))
		}
	}
}

func (s *session) event(name string) msg {
	s.t.Helper()
	line := s.next("event "+name, func(l string) bool { m, ok := decode(l); return ok && m.Event == name })
	m, _ := decode(line)
	return m
}

func (s *session) reply(id string) msg {
	s.t.Helper()
	line := s.next("reply "+id, func(l string) bool { m, ok := decode(l); return ok && m.Event == "" && string(m.ID) == id })
	m, _ := decode(line)
	return m
}

// wait returns Main's exit code and the rest of stdout.
func (s *session) wait() (int, []string) {
	s.t.Helper()
	var rest []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.exited = true
				return <-s.code, rest
			}
			s.seen = append(s.seen, line)
			rest = append(rest, line)
		case <-timeout:
			s.t.Fatalf("fake flutter did not exit; seen:\n%s", strings.Join(s.seen, "\n"))
		}
	}
}

func index(lines []string, match func(string) bool) int {
	for i, l := range lines {
		if match(l) {
			return i
		}
	}
	return -1
}

func isEvent(name string) func(string) bool {
	return func(l string) bool { m, ok := decode(l); return ok && m.Event == name }
}

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

func mustMain(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, getenv(vars), nil, &out, &errb)
	return out.String(), errb.String(), code
}

func TestBuild(t *testing.T) {
	t.Chdir(t.TempDir())
	os.WriteFile("pubspec.yaml", []byte("name: demo\ndependencies:\n  flutter:\n    sdk: flutter\n"), 0o644)
	tests := []struct {
		args     []string
		built    string // the ✓ line
		artifact string // a file or directory that must exist
		status   string // the timed line
	}{
		{[]string{"apk"}, "✓ Built build/app/outputs/flutter-apk/app-release.apk (40.1MB)",
			"build/app/outputs/flutter-apk/app-release.apk", "Running Gradle task 'assembleRelease'..."},
		{[]string{"apk", "--debug"}, "✓ Built build/app/outputs/flutter-apk/app-debug.apk",
			"build/app/outputs/flutter-apk/app-debug.apk", "Running Gradle task 'assembleDebug'..."},
		{[]string{"apk", "--flavor", "dev"}, "✓ Built build/app/outputs/flutter-apk/app-dev-release.apk (40.1MB)",
			"build/app/outputs/flutter-apk/app-dev-release.apk", "Running Gradle task 'assembleDevRelease'..."},
		{[]string{"appbundle"}, "✓ Built build/app/outputs/bundle/release/app-release.aab (20.5MB)",
			"build/app/outputs/bundle/release/app-release.aab", "Running Gradle task 'bundleRelease'..."},
		{[]string{"web"}, "✓ Built build/web", "build/web/index.html", "Compiling lib/main.dart for the Web..."},
		{[]string{"linux", "--profile"}, "✓ Built build/linux/x64/profile/bundle", "build/linux/x64/profile/bundle/demo",
			"Building Linux application..."},
		{[]string{"windows"}, "✓ Built build/windows/x64/runner/Release", "build/windows/x64/runner/Release/demo.exe",
			"Building Windows application..."},
		{[]string{"macos"}, "✓ Built build/macos/Build/Products/Release/demo.app (41.6MB)",
			"build/macos/Build/Products/Release/demo.app/Contents/MacOS/demo", "Building macOS application..."},
		{[]string{"ios"}, "✓ Built build/ios/iphoneos/Runner.app (18.9MB)", "build/ios/iphoneos/Runner.app/Info.plist",
			"Running Xcode build..."},
		{[]string{"ipa"}, "✓ Built IPA to build/ios/ipa (25.4MB)", "build/ios/ipa/demo.ipa", "Running Xcode build..."},
		{[]string{"aar"}, "✓ Built build/host/outputs/repo",
			"build/host/outputs/repo/com/example/demo/flutter_release/1.0/flutter_release-1.0.aar",
			"Running Gradle task 'assembleAarRelease'..."},
		{[]string{"ios-framework"}, "Frameworks written to build/ios/framework.",
			"build/ios/framework/Release/Flutter.xcframework/Info.plist", " ├─Building App.xcframework..."},
	}
	for i, tt := range tests {
		stdout, stderr, code := mustMain(t, nil, append([]string{"build"}, tt.args...)...)
		lines := strings.Split(stdout, "\n")
		if code != 0 || stderr != "" {
			t.Errorf("build %v = %d, stderr %q", tt.args, code, stderr)
		}
		if index(lines, func(l string) bool { return l == tt.built }) < 0 {
			t.Errorf("build %v printed:\n%s\nwant line %q", tt.args, stdout, tt.built)
		}
		timed := regexp.MustCompile(`^` + regexp.QuoteMeta(tt.status) + ` +\d+\.\ds$`)
		if index(lines, timed.MatchString) < 0 {
			t.Errorf("build %v: no timed status line %q in:\n%s", tt.args, tt.status, stdout)
		}
		if _, err := os.Stat(tt.artifact); err != nil {
			t.Errorf("build %v: artifact: %v", tt.args, err)
		}
		if got := strings.Contains(stdout, "Resolving dependencies...\n"); got != (i == 0) {
			t.Errorf("build %v: printed pub get = %v, want only on the first build", tt.args, got)
		}
	}
	// The status line pads to a fixed column, as flutter does.
	stdout, _, _ := mustMain(t, nil, "build", "apk")
	if !strings.Contains(stdout, "Running Gradle task 'assembleRelease'...                      16.8s\n") {
		t.Errorf("apk status line not aligned:\n%s", stdout)
	}
	if !strings.Contains(stdout, `Font asset "MaterialIcons-Regular.otf" was tree-shaken`) {
		t.Errorf("release build without the tree-shaking line:\n%s", stdout)
	}
}

func TestBuildFail(t *testing.T) {
	t.Chdir(t.TempDir())
	tests := []struct {
		platform string
		tail     []string
		artifact string
	}{
		{"apk", []string{"FAILURE: Build failed with an exception.", "BUILD FAILED in 2m 8s",
			"Gradle task assembleRelease failed with exit code 1"}, "build/app/outputs/flutter-apk/app-release.apk"},
		{"appbundle", []string{"FAILURE: Build failed with an exception.", "Gradle task bundleRelease failed with exit code 1"},
			"build/app/outputs/bundle"},
		{"web", []string{"Target dart2js failed: ", "Error: Failed to compile application for the Web."}, "build/web"},
		{"linux", []string{"Build process failed"}, "build/linux"},
		{"ios", []string{"Error (Xcode): lib/main.dart:12:3: Error: Expected ';' after this.",
			"Encountered error while building for device."}, "build/ios/iphoneos"},
	}
	for _, tt := range tests {
		stdout, stderr, code := mustMain(t, map[string]string{EnvBuildFail: "1"}, "build", tt.platform)
		if code != 1 {
			t.Errorf("build %s = %d, want 1", tt.platform, code)
		}
		for _, want := range tt.tail {
			if !strings.Contains(stderr, want) {
				t.Errorf("build %s stderr lacks %q:\n%s", tt.platform, want, stderr)
			}
		}
		if strings.Contains(stdout, "✓ Built") {
			t.Errorf("build %s failed but printed:\n%s", tt.platform, stdout)
		}
		if _, err := os.Stat(tt.artifact); err == nil {
			t.Errorf("build %s failed but left %s", tt.platform, tt.artifact)
		}
	}
	_, stderr, _ := mustMain(t, map[string]string{EnvBuildFail: "1"}, "build", "apk")
	if !strings.HasSuffix(stderr, "BUILD FAILED in 2m 8s\nGradle task assembleRelease failed with exit code 1\n") {
		t.Errorf("apk failure tail:\n%s", stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"build", "android"}, "Could not find a subcommand named \"android\" for \"flutter build\".\n\n" +
			"Run 'flutter -h' (or 'flutter <command> -h') for available flutter commands and options.\n"},
		{[]string{"frobnicate"}, "Could not find a command named \"frobnicate\".\n\n" +
			"Run 'flutter -h' (or 'flutter <command> -h') for available flutter commands and options.\n"},
		{[]string{"build"}, ""},
		{[]string{"create"}, ""},
		{[]string{"run", "--machine", "-d"}, "Option -d requires an argument.\n\n" + usageHint + "\n"},
	}
	for _, tt := range tests {
		stdout, stderr, code := mustMain(t, nil, tt.args...)
		if code != ExitUsage || stdout != "" || (tt.stderr != "" && stderr != tt.stderr) || stderr == "" {
			t.Errorf("flutter %v = %d, stdout %q, stderr %q; want 64 and %q", tt.args, code, stdout, stderr, tt.stderr)
		}
	}
}

func TestBadSteering(t *testing.T) {
	for _, kv := range [][2]string{{EnvLines, "lots"}, {EnvTickMS, "-1"}, {EnvBuildFail, "maybe"}} {
		_, stderr, code := mustMain(t, map[string]string{kv[0]: kv[1]}, "doctor")
		if code != 2 || !strings.Contains(stderr, kv[0]) {
			t.Errorf("%s=%s: code %d stderr %q, want 2 naming the variable", kv[0], kv[1], code, stderr)
		}
	}
}

func TestDevices(t *testing.T) {
	stdout, _, code := mustMain(t, nil, "devices", "--machine")
	var ds []struct {
		Name, ID, TargetPlatform, SDK string
		IsSupported, Emulator         bool
		Capabilities                  map[string]bool
	}
	if err := json.Unmarshal([]byte(stdout), &ds); err != nil || code != 0 {
		t.Fatalf("devices --machine = %d, %v:\n%s", code, err, stdout)
	}
	platforms := map[string]bool{}
	for _, d := range ds {
		platforms[d.TargetPlatform] = true
		if d.Name == "" || d.ID == "" || !d.IsSupported || len(d.Capabilities) != 7 {
			t.Errorf("device %+v is incomplete", d)
		}
		if d.TargetPlatform == "android-x64" && !d.Emulator {
			t.Errorf("the android device is not an emulator")
		}
	}
	if len(ds) != 3 || !platforms["linux-x64"] || !platforms["web-javascript"] || !platforms["android-x64"] {
		t.Errorf("devices = %+v, want linux, web and an emulator", ds)
	}
	if !strings.HasPrefix(stdout, "[\n  {\n    \"name\": ") {
		t.Errorf("devices --machine is not pretty-printed:\n%s", stdout)
	}
	if stdout, _, _ := mustMain(t, map[string]string{EnvNoDevices: "1"}, "devices", "--machine"); stdout != "[]\n" {
		t.Errorf("no devices = %q, want []", stdout)
	}
	if stdout, _, _ := mustMain(t, nil, "devices"); !strings.HasPrefix(stdout, "Found 3 connected devices:\n") {
		t.Errorf("devices = %q", stdout)
	}
}

func TestDoctorAndVersion(t *testing.T) {
	stdout, _, code := mustMain(t, nil, "doctor")
	if code != 0 || !strings.HasPrefix(stdout, "Doctor summary") || !strings.Contains(stdout, "• No issues found!") {
		t.Errorf("doctor = %d:\n%s", code, stdout)
	}
	stdout, _, code = mustMain(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "Flutter "+FlutterVersion+" • channel stable • ") {
		t.Errorf("--version = %d:\n%s", code, stdout)
	}
	stdout, _, _ = mustMain(t, nil, "--version", "--machine")
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v["frameworkVersion"] != FlutterVersion {
		t.Errorf("--version --machine = %s (%v)", stdout, err)
	}
}

func TestCreate(t *testing.T) {
	t.Chdir(t.TempDir())
	stdout, stderr, code := mustMain(t, nil, "create", "my_app", "--org", "com.acme")
	if code != 0 || stderr != "" {
		t.Fatalf("create = %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"Creating project my_app...\n", "\nAll done!\n", "Your application code is in my_app/lib/main.dart.\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("create output lacks %q:\n%s", want, stdout)
		}
	}
	pubspec, err := os.ReadFile("my_app/pubspec.yaml")
	if err != nil || !strings.HasPrefix(string(pubspec), "name: my_app\n") ||
		!strings.Contains(string(pubspec), "dependencies:\n  flutter:\n    sdk: flutter\n") {
		t.Errorf("pubspec.yaml = %q (%v)", pubspec, err)
	}
	for _, dir := range []string{"lib", "test", "android", "ios", "web", "linux", "macos", "windows"} {
		entries, err := os.ReadDir(filepath.Join("my_app", dir))
		if err != nil || len(entries) == 0 {
			t.Errorf("%s/: %v, %d entries", dir, err, len(entries))
		}
	}
	if b, _ := os.ReadFile("my_app/android/app/build.gradle"); !strings.Contains(string(b), `"com.acme.my_app"`) {
		t.Errorf("build.gradle = %s", b)
	}
	if b, _ := os.ReadFile("my_app/.metadata"); !strings.Contains(string(b), "project_type: app\n") {
		t.Errorf(".metadata = %s", b)
	}

	// Again: nothing is overwritten.
	os.WriteFile("my_app/lib/main.dart", []byte("// mine\n"), 0o644)
	stdout, _, code = mustMain(t, nil, "create", "my_app")
	if b, _ := os.ReadFile("my_app/lib/main.dart"); code != 0 || string(b) != "// mine\n" ||
		!strings.Contains(stdout, "Recreating project my_app...\n") || !strings.Contains(stdout, "Wrote 0 files.\n") {
		t.Errorf("recreate = %d, main.dart %q:\n%s", code, b, stdout)
	}

	// --project-name, --platforms.
	if _, _, code := mustMain(t, nil, "create", "Some-Dir", "--project-name", "pkg", "--platforms", "web"); code != 0 {
		t.Errorf("create --project-name = %d", code)
	}
	if _, err := os.Stat("Some-Dir/android"); err == nil {
		t.Errorf("--platforms web created android/")
	}
	if b, _ := os.ReadFile("Some-Dir/pubspec.yaml"); !strings.HasPrefix(string(b), "name: pkg\n") {
		t.Errorf("pubspec = %s", b)
	}

	_, stderr, code = mustMain(t, nil, "create", "My-App")
	if code != 1 || !strings.HasPrefix(stderr, `"My-App" is not a valid Dart package name.`) {
		t.Errorf("create My-App = %d, %q", code, stderr)
	}
}
