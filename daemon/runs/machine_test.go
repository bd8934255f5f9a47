package runs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fly-dev/fly/internal/fakeflutter"
)

// Lines of the sample transcript in the shared protocol notes, and the
// text around them.
var machineSamples = []struct {
	line string
	want machineMsg
	ok   bool
}{
	{`[{"event":"daemon.connected","params":{"version":"0.6.1","pid":41234}}]`,
		machineMsg{Event: "daemon.connected", Params: raw(`{"version":"0.6.1","pid":41234}`)}, true},
	{`[{"event":"app.start","params":{"appId":"3c0f5c1e-5b6a-4f2e-9a57-2f8d3b1c9e10","deviceId":"emulator-5554","directory":"/home/u/demo","supportsRestart":true,"launchMode":"run","mode":"debug"}}]`,
		machineMsg{Event: "app.start", Params: raw(`{"appId":"3c0f5c1e-5b6a-4f2e-9a57-2f8d3b1c9e10","deviceId":"emulator-5554","directory":"/home/u/demo","supportsRestart":true,"launchMode":"run","mode":"debug"}`)}, true},
	{`Launching lib/main.dart on sdk gphone64 x86 64 in debug mode...`, machineMsg{}, false},
	{`[{"event":"app.progress","params":{"appId":"3c0f5c1e-...","id":"0","progressId":null,"message":"Running Gradle task 'assembleDebug'...","finished":false}}]`,
		machineMsg{Event: "app.progress", Params: raw(`{"appId":"3c0f5c1e-...","id":"0","progressId":null,"message":"Running Gradle task 'assembleDebug'...","finished":false}`)}, true},
	{`✓ Built build/app/outputs/flutter-apk/app-debug.apk`, machineMsg{}, false},
	{`[{"id":1,"result":{"code":0,"message":"Reloaded 1 of 812 libraries"}}]`,
		machineMsg{ID: raw(`1`), Result: raw(`{"code":0,"message":"Reloaded 1 of 812 libraries"}`)}, true},
	{`[{"id":2,"result":{"code":0,"message":""}}]` + "\r\n",
		machineMsg{ID: raw(`2`), Result: raw(`{"code":0,"message":""}`)}, true},
	{`[{"id":3,"error":"app 'nope' not found","trace":"#0 AppDomain.restart (...)"}]` + "\n",
		machineMsg{ID: raw(`3`), Error: "app 'nope' not found", Trace: "#0 AppDomain.restart (...)"}, true},
	{`[{"id":4,"result":true}]`, machineMsg{ID: raw(`4`), Result: raw(`true`)}, true},
	{`[{"id":"x"}]`, machineMsg{ID: raw(`"x"`)}, true}, // a void result
	{`[{"id":5,"error":{"code":-32601}}]`, machineMsg{ID: raw(`5`), Error: `{"code":-32601}`}, true},
	{`[{"id":7,"method":"app.exposeUrl","params":{"url":"http://localhost:1234"}}]`,
		machineMsg{Method: "app.exposeUrl", ID: raw(`7`), Params: raw(`{"url":"http://localhost:1234"}`)}, true},
	{`[{"event":"app.started"}]`, machineMsg{Event: "app.started"}, true},
	{`[{"event":"app.started","params":null,"id":9,"extra":[1,2]}]`, machineMsg{Event: "app.started"}, true},
	{`[{"event":"future.thing","params":[1,"two"]}]`, machineMsg{Event: "future.thing", Params: raw(`[1,"two"]`)}, true},
	{` [{"event":"app.started"}]`, machineMsg{}, false},
	{`[{"event":"app.started"}] `, machineMsg{}, false},
	{`[{"event":"app.started"},{"event":"app.stop"}]`, machineMsg{}, false},
	{`[{}]`, machineMsg{}, false},
	{`[{"params":{}}]`, machineMsg{}, false},
	{`[{"id":null,"result":1}]`, machineMsg{}, false},
	{`[{"event":5}]`, machineMsg{}, false},
	{`[{"event":"app.log","params":{"log":"unterminated}]`, machineMsg{}, false},
	{`[{ not json }]`, machineMsg{}, false},
	{`[{}`, machineMsg{}, false},
	{`[]`, machineMsg{}, false},
	{``, machineMsg{}, false},
	{"\n", machineMsg{}, false},
	{`flutter: [{"event":"app.log"}]`, machineMsg{}, false},
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestMachineParseLine(t *testing.T) {
	for _, tt := range machineSamples {
		got, ok := parseMachineLine([]byte(tt.line))
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseMachineLine(%q) = %+v, %v, want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMachineParams(t *testing.T) {
	tests := []struct {
		line string
		want any
	}{
		{`[{"event":"daemon.connected","params":{"version":"0.6.1","pid":41234}}]`,
			machineDaemonConnectedParams{Version: "0.6.1", PID: 41234}},
		{`[{"event":"daemon.logMessage","params":{"level":"error","message":"boom","stackTrace":"#0 x"}}]`,
			machineLogMessageParams{Level: "error", Message: "boom", StackTrace: "#0 x"}},
		{`[{"event":"app.start","params":{"appId":"A","deviceId":"emulator-5554","directory":"/home/u/demo","supportsRestart":true,"launchMode":"run","mode":"debug","newField":{"x":1}}}]`,
			machineAppStartParams{AppID: "A", DeviceID: "emulator-5554", Directory: "/home/u/demo", SupportsRestart: true, LaunchMode: "run", Mode: "debug"}},
		{`[{"event":"app.debugPort","params":{"appId":"A","port":40123,"wsUri":"ws://127.0.0.1:40123/AbC9xYz01=/ws"}}]`,
			machineDebugPortParams{AppID: "A", Port: 40123, WSURI: "ws://127.0.0.1:40123/AbC9xYz01=/ws"}},
		{`[{"event":"app.debugPort","params":{"appId":"A","port":1,"wsUri":"ws://h/ws","baseUri":"file:///x/"}}]`,
			machineDebugPortParams{AppID: "A", Port: 1, WSURI: "ws://h/ws", BaseURI: "file:///x/"}},
		{`[{"event":"app.dtd","params":{"appId":"A","uri":"ws://127.0.0.1:40555/Qw3rTy99k="}}]`,
			machineDTDParams{AppID: "A", URI: "ws://127.0.0.1:40555/Qw3rTy99k="}},
		{`[{"event":"app.dtd","params":{"uri":"ws://127.0.0.1:40555/Qw3rTy99k="}}]`,
			machineDTDParams{URI: "ws://127.0.0.1:40555/Qw3rTy99k="}},
		{`[{"event":"app.devTools","params":{"uri":"http://127.0.0.1:9100"}}]`,
			machineDevToolsParams{URI: "http://127.0.0.1:9100"}},
		{`[{"event":"app.webLaunchUrl","params":{"appId":"A","url":"http://localhost:5000","launched":true}}]`,
			machineWebLaunchURLParams{AppID: "A", URL: "http://localhost:5000", Launched: true}},
		{`[{"event":"app.started","params":{"appId":"A"}}]`, machineAppIDParams{AppID: "A"}},
		{`[{"event":"app.log","params":{"appId":"A","log":"flutter: counter=0"}}]`,
			machineAppLogParams{AppID: "A", Log: "flutter: counter=0"}},
		{`[{"event":"app.log","params":{"appId":"A","log":"E/flutter: boom","error":true,"stackTrace":"#0 main"}}]`,
			machineAppLogParams{AppID: "A", Log: "E/flutter: boom", Error: true, StackTrace: "#0 main"}},
		{`[{"event":"app.progress","params":{"appId":"A","id":"0","progressId":null,"message":"Running Gradle task 'assembleDebug'...","finished":false}}]`,
			machineProgressParams{AppID: "A", ID: "0", Message: "Running Gradle task 'assembleDebug'..."}},
		{`[{"event":"app.progress","params":{"appId":"A","id":"1","progressId":"hot.reload","finished":true}}]`,
			machineProgressParams{AppID: "A", ID: "1", ProgressID: "hot.reload", Finished: true}},
		{`[{"event":"app.stop","params":{"appId":"A"}}]`, machineAppStopParams{AppID: "A"}},
		{`[{"event":"app.stop","params":{"appId":"A","error":"Gradle task assembleDebug failed with exit code 1","trace":"#0 x"}}]`,
			machineAppStopParams{AppID: "A", Error: "Gradle task assembleDebug failed with exit code 1", Trace: "#0 x"}},
		{`[{"event":"app.stop","params":{"appId":"A","error":{"kind":"odd"},"trace":null}}]`,
			machineAppStopParams{AppID: "A", Error: `{"kind":"odd"}`}},
		{`[{"id":7,"method":"app.exposeUrl","params":{"url":"http://localhost:1234"}}]`,
			machineExposeURLParams{URL: "http://localhost:1234"}},
	}
	for _, tt := range tests {
		m, ok := parseMachineLine([]byte(tt.line))
		if !ok {
			t.Errorf("parseMachineLine(%s) is text", tt.line)
			continue
		}
		// Decode into a fresh value of the wanted type.
		got := reflect.New(reflect.TypeOf(tt.want))
		if err := json.Unmarshal(m.Params, got.Interface()); err != nil {
			t.Errorf("decode %s: %v", tt.line, err)
			continue
		}
		if !reflect.DeepEqual(got.Elem().Interface(), tt.want) {
			t.Errorf("params of %s = %+v, want %+v", tt.line, got.Elem().Interface(), tt.want)
		}
	}

	// The generic helper: missing params are the zero value, bad ones an error.
	if p, err := machineParams[machineAppIDParams](machineMsg{Event: machineAppStarted}); err != nil || p != (machineAppIDParams{}) {
		t.Errorf("machineParams(no params) = %+v, %v", p, err)
	}
	m, _ := parseMachineLine([]byte(`[{"event":"app.log","params":{"appId":"A","log":42}}]`))
	if _, err := machineParams[machineAppLogParams](m); err == nil || !strings.HasPrefix(err.Error(), "decode app.log params: ") {
		t.Errorf("machineParams(bad log) error = %v", err)
	}
	m, _ = parseMachineLine([]byte(`[{"id":1,"result":{"code":1,"message":"Try again after fixing the above error(s)."}}]`))
	if id, ok := m.intID(); !ok || id != 1 {
		t.Errorf("intID = %d, %v", id, ok)
	}
	var res machineRestartResult
	if err := json.Unmarshal(m.Result, &res); err != nil || res.Code != 1 {
		t.Errorf("restart result = %+v, %v", res, err)
	}
	if _, ok := (machineMsg{ID: raw(`"s"`)}).intID(); ok {
		t.Errorf("intID of a string id reported ok")
	}
}

func TestMachineRequest(t *testing.T) {
	tests := []struct {
		id     int
		method string
		params any
		want   string
	}{
		{1, machineAppRestart, machineRestartParams{AppID: "A", Reason: "manual", Debounce: true},
			`[{"id":1,"method":"app.restart","params":{"appId":"A","fullRestart":false,"reason":"manual","debounce":true}}]` + "\n"},
		{2, machineAppRestart, machineRestartParams{AppID: "A", FullRestart: true},
			`[{"id":2,"method":"app.restart","params":{"appId":"A","fullRestart":true}}]` + "\n"},
		{4, machineAppStop, machineAppIDParams{AppID: "A"}, `[{"id":4,"method":"app.stop","params":{"appId":"A"}}]` + "\n"},
		{5, machineDaemonVersion, nil, `[{"id":5,"method":"daemon.version"}]` + "\n"},
		{6, machineAppCallServiceExtension, map[string]any{"appId": "A", "methodName": "ext.flutter.debugPaint"},
			`[{"id":6,"method":"app.callServiceExtension","params":{"appId":"A","methodName":"ext.flutter.debugPaint"}}]` + "\n"},
	}
	for _, tt := range tests {
		got := machineRequest(tt.id, tt.method, tt.params)
		if string(got) != tt.want {
			t.Errorf("machineRequest(%d, %s, %+v) = %s, want %s", tt.id, tt.method, tt.params, got, tt.want)
		}
		// flutter accepts only lines framed as [{...}].
		if m, ok := parseMachineLine(got); !ok || m.Method != tt.method {
			t.Errorf("machineRequest(%d, %s) does not parse back: %+v", tt.id, tt.method, m)
		}
	}
	if got := string(machineResponse(raw(`"7"`), machineExposeURLParams{URL: "http://x"})); got != `[{"id":"7","result":{"url":"http://x"}}]`+"\n" {
		t.Errorf("machineResponse = %s", got)
	}
}

func FuzzParseMachineLine(f *testing.F) {
	for _, s := range machineSamples {
		f.Add([]byte(s.line))
	}
	f.Add([]byte(`[{"event":"app.log","params":{"appId":"A","log":"}]"}}]`))
	f.Add([]byte(`[{"id":1,"method":"","event":"","result":null,"error":null}]`))
	f.Add([]byte("[{\"event\":\"\xff\",\"params\":{}}]"))
	f.Fuzz(func(t *testing.T, line []byte) {
		orig := bytes.Clone(line)
		m, ok := parseMachineLine(line)
		if !bytes.Equal(line, orig) {
			t.Fatalf("parseMachineLine modified its input")
		}
		body := bytes.TrimRight(line, "\r\n")
		framed := bytes.HasPrefix(body, []byte("[{")) && bytes.HasSuffix(body, []byte("}]"))
		if !ok {
			if !reflect.DeepEqual(m, machineMsg{}) {
				t.Fatalf("text line %q gave %+v", line, m)
			}
		} else {
			if !framed {
				t.Fatalf("unframed line %q parsed as %+v", line, m)
			}
			if m.Event == "" && m.ID == nil {
				t.Fatalf("%q parsed as a message with no event and no id", line)
			}
			for _, r := range []json.RawMessage{m.ID, m.Params, m.Result} {
				if r != nil && !json.Valid(r) {
					t.Fatalf("%q kept invalid JSON %q", line, r)
				}
			}
		}
		// A parsed event round trips through a re-encoding.
		if ok && m.Event != "" {
			b, err := json.Marshal(struct {
				Event  string          `json:"event"`
				Params json.RawMessage `json:"params,omitempty"`
			}{m.Event, m.Params})
			if err != nil {
				t.Fatalf("re-encode %+v: %v", m, err)
			}
			m2, ok2 := parseMachineLine(append(append([]byte{'['}, b...), ']', '\n'))
			if !ok2 || m2.Event != m.Event || !jsonEqual(m2.Params, m.Params) {
				t.Fatalf("event %+v re-parsed as %+v, %v", m, m2, ok2)
			}
		}
		// Any text carried as an app.log event comes back intact, whatever
		// it holds (brackets, "}]", newlines, quotes).
		if utf8.Valid(line) {
			enc := machineRequestLike(t, "app.log", machineAppLogParams{AppID: "A", Log: string(line)})
			m3, ok3 := parseMachineLine(enc)
			p, err := machineParams[machineAppLogParams](m3)
			if !ok3 || m3.Event != machineAppLog || err != nil || p.Log != string(line) {
				t.Fatalf("app.log carrying %q parsed as %+v, %v (%v)", line, p, ok3, err)
			}
		}
		// The fast path for app.log lines agrees with the general one.
		if p, ok := parseAppLog(line); ok {
			m4, ok4 := parseMachineLine(line)
			q, err := machineParams[machineAppLogParams](m4)
			if !ok4 || m4.Event != machineAppLog || err != nil || p != q {
				t.Fatalf("parseAppLog(%q) = %+v; general: %+v, %v, %v", line, p, q, ok4, err)
			}
		}
		// Decoding params never panics, whatever the event.
		machineParams[machineAppStartParams](m)
		machineParams[machineProgressParams](m)
		machineParams[machineAppStopParams](m)
		m.intID()
	})
}

// machineRequestLike encodes an event line as flutter does.
func machineRequestLike(t *testing.T, event string, params any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"event": event, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{'['}, b...), ']', '\n')
}

// jsonEqual reports whether a and b hold the same JSON value (encodings
// differ: json.Marshal escapes & < > in raw messages).
func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// TestMachineFakeFlutterTranscript drives the fake flutter through a run
// with the parser and the request encoder: every line is either text or a
// message whose params decode, and reload and stop round trip.
func TestMachineFakeFlutterTranscript(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	vars := map[string]string{fakeflutter.EnvTickMS: "10", fakeflutter.EnvLines: "3"}
	code := make(chan int, 1)
	go func() {
		code <- fakeflutter.Main([]string{"run", "--machine", "-d", "emulator-5554"},
			func(k string) string { return vars[k] }, inR, outW, io.Discard)
		outW.Close()
	}()
	// flyd writes to a pipe with a kernel buffer; an io.Pipe has none, so
	// requests go through a goroutine that cannot block the reading below.
	send := make(chan []byte, 16)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for b := range send {
			inW.Write(b)
		}
	}()
	defer func() {
		close(send)
		inW.Close()
		<-writerDone
	}()

	var (
		appID, wsURI, dtdURI string
		connected            machineDaemonConnectedParams
		texts, logs          []string
		progress             = map[string]bool{} // open progress ids
		results              = map[int]json.RawMessage{}
		stopped              bool
	)
	br := bufio.NewReader(outR)
	deadline := time.AfterFunc(10*time.Second, func() { outR.CloseWithError(io.ErrClosedPipe) })
	defer deadline.Stop()
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break
		}
		m, ok := parseMachineLine(line)
		if !ok {
			texts = append(texts, strings.TrimSuffix(string(line), "\n"))
			continue
		}
		if id, ok := m.intID(); ok {
			if m.Error != "" {
				t.Errorf("request %d failed: %s", id, m.Error)
			}
			results[id] = m.Result
			continue
		}
		var derr error
		switch m.Event {
		case machineDaemonConnected:
			connected, derr = machineParams[machineDaemonConnectedParams](m)
		case machineAppStart:
			var p machineAppStartParams
			p, derr = machineParams[machineAppStartParams](m)
			appID = p.AppID
			if !p.SupportsRestart || p.Mode != "debug" || p.DeviceID != "emulator-5554" {
				t.Errorf("app.start = %+v", p)
			}
		case machineAppDebugPort:
			var p machineDebugPortParams
			p, derr = machineParams[machineDebugPortParams](m)
			wsURI = p.WSURI
		case machineAppDTD:
			var p machineDTDParams
			p, derr = machineParams[machineDTDParams](m)
			dtdURI = p.URI
		case machineAppDevTools:
			_, derr = machineParams[machineDevToolsParams](m)
		case machineAppProgress:
			var p machineProgressParams
			p, derr = machineParams[machineProgressParams](m)
			progress[p.ID] = !p.Finished
		case machineAppStarted:
			send <- machineRequest(1, machineAppRestart, machineRestartParams{AppID: appID, Reason: "manual", Debounce: true})
			send <- machineRequest(2, machineAppRestart, machineRestartParams{AppID: appID, FullRestart: true})
			send <- machineRequest(3, machineDaemonVersion, nil)
		case machineAppLog:
			var p machineAppLogParams
			p, derr = machineParams[machineAppLogParams](m)
			logs = append(logs, p.Log)
			if len(logs) == 3 {
				send <- machineRequest(4, machineAppStop, machineAppIDParams{AppID: appID})
			}
		case machineAppStop:
			var p machineAppStopParams
			p, derr = machineParams[machineAppStopParams](m)
			stopped = p.AppID == appID && p.Error == ""
		default:
			t.Errorf("unexpected event %s", m.Event)
		}
		if derr != nil {
			t.Errorf("%s: %v", line, derr)
		}
	}
	if c := <-code; c != 0 {
		t.Errorf("fake flutter exit code = %d", c)
	}
	if connected.Version != "0.6.1" || connected.PID != os.Getpid() || appID == "" || wsURI == "" || dtdURI == "" || !stopped {
		t.Errorf("connected %+v, appID %q, wsURI %q, dtdURI %q, stopped %v", connected, appID, wsURI, dtdURI, stopped)
	}
	for id, open := range progress {
		if open {
			t.Errorf("progress %s never finished", id)
		}
	}
	var reload, restart machineRestartResult
	json.Unmarshal(results[1], &reload)
	json.Unmarshal(results[2], &restart)
	if reload != (machineRestartResult{0, "Reloaded 1 of 812 libraries"}) || restart.Code != 0 ||
		string(results[3]) != `"0.6.1"` || string(results[4]) != "true" {
		t.Errorf("results = %v", results)
	}
	wantTexts := []string{
		"Launching lib/main.dart on sdk gphone64 x86 64 in debug mode...",
		"✓ Built build/app/outputs/flutter-apk/app-debug.apk",
		"Reloaded 1 of 812 libraries in 412ms (compile: 35 ms, reload: 160 ms, reassemble: 170 ms).",
		"Restarted application in 1,034ms.",
	}
	if !reflect.DeepEqual(texts, wantTexts) {
		t.Errorf("text lines = %q, want %q", texts, wantTexts)
	}
	if !reflect.DeepEqual(logs, []string{"flutter: tick 1", "flutter: tick 2", "flutter: tick 3"}) {
		t.Errorf("logs = %q", logs)
	}
}

// TestParseAppLogFastPath: the one-pass decoding of app.log lines agrees
// with the general one, and leaves every other line to it.
func TestParseAppLogFastPath(t *testing.T) {
	for _, line := range []string{
		`[{"event":"app.log","params":{"appId":"a","log":"flutter: hi"}}]`,
		`[{"event":"app.log","params":{"appId":"a","log":"boom","error":true,"stackTrace":"#0 main"}}]` + "\r\n",
		`[{"event":"app.log","params":{"log":"}}]"}}]`,
		`[{"event":"app.log","params":{"appId":"a","log":"say \"hi\" \\ \u00e9 \ud83e\udd8b","error":false}}]`,
		`[{"event":"app.log","params":{"appId":"a","log":"x","stackTrace":"#0 \n#1"}}]`,
	} {
		p, ok := parseAppLog([]byte(line))
		m, mok := parseMachineLine([]byte(line))
		q, err := machineParams[machineAppLogParams](m)
		if !ok || !mok || err != nil || p != q {
			t.Errorf("parseAppLog(%s) = %+v, %v; general: %+v, %v", line, p, ok, q, err)
		}
	}
	for _, line := range []string{
		`[{"params":{"appId":"a","log":"x"},"event":"app.log"}]`,
		`[{"event":"app.started","params":{"appId":"a"}}]`,
		`[{"event":"app.log","params":{"log":`,
		`flutter: plain`,
		`[{"event":"app.log","params":{"appId":"a"}}]`,
	} {
		if _, ok := parseAppLog([]byte(line)); ok {
			t.Errorf("parseAppLog(%s) took a line that is not an app.log in the usual order", line)
		}
	}
}
