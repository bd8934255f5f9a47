package runs

// This file speaks the `flutter run --machine` protocol (daemon protocol
// 0.6.1): it decodes the lines flutter prints on stdout, and encodes and
// sends (request) the requests flyd writes to its stdin. stdout mixes
// one-object JSON lines wrapped in [ ] with plain text (run --machine
// logs status to stdout), so a line that is not a well-formed message is
// text, never an error.
// Events may come in any order and carry unknown fields; unknown events
// are passed through for the caller to keep or ignore.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Event and method names of the --machine protocol.
const (
	machineDaemonConnected  = "daemon.connected"
	machineDaemonLogMessage = "daemon.logMessage"
	machineAppStart         = "app.start"
	machineAppDebugPort     = "app.debugPort"
	machineAppDTD           = "app.dtd"
	machineAppDevTools      = "app.devTools"
	machineAppWebLaunchURL  = "app.webLaunchUrl"
	machineAppStarted       = "app.started"
	machineAppLog           = "app.log"
	machineAppProgress      = "app.progress"
	machineAppStop          = "app.stop" // both the event and the request

	machineAppRestart              = "app.restart"
	machineAppDetach               = "app.detach"
	machineAppCallServiceExtension = "app.callServiceExtension"
	machineDaemonVersion           = "daemon.version"
	machineDaemonShutdown          = "daemon.shutdown"

	// machineAppExposeURL is a request from flutter to flyd; it comes only
	// with --web-allow-expose-url.
	machineAppExposeURL = "app.exposeUrl"
)

// machineMsg is one decoded `[{...}]` line. Exactly one of these holds:
// Event is set (an event); Method and ID are set (a request from
// flutter); ID alone is set (a response to flyd, with Result, or with
// Error and Trace when it failed).
type machineMsg struct {
	Event  string
	Method string
	ID     json.RawMessage // as sent: flyd's ids are integers (see intID)
	Params json.RawMessage // nil when absent or null
	Result json.RawMessage // nil for a void result or an error
	Error  string          // the error message of a failed request
	Trace  string          // the Dart stack of a failed request
}

// machineWire is the decoding shape of a message. The fields that flutter
// fills with arbitrary JSON are kept raw, so that an odd value does not
// turn the whole line into text.
type machineWire struct {
	Event  string          `json:"event"`
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  machineText     `json:"error"`
	Trace  machineText     `json:"trace"`
}

// parseMachineLine decodes one stdout line (a trailing "\n" or "\r\n" is
// ignored). It reports false for a plain text line: one that does not
// start with `[{` and end with `}]`, does not hold exactly one JSON
// object, or holds neither an event, a method nor an id. It never fails
// otherwise, and does not keep line.
// appLogPrefix is how flutter_tools writes an app.log event: the event
// name first, then its params object.
var appLogPrefix = []byte(`[{"event":"app.log","params":{`)

// parseAppLog decodes the params of an app.log line written as flutter
// writes it (appId, log, then optionally error and stackTrace, no
// whitespace), the most frequent line by far, in one pass without
// reflection: at 200k lines/s encoding/json was most of the ingest cost.
// ok is false for any other line, and for anything this strict scan does
// not handle (another order, a null, invalid UTF-8, …); parseMachineLine
// then decodes it in general. When ok, p is what parseMachineLine gives
// (FuzzParseMachineLine checks this).
func parseAppLog(line []byte) (p machineAppLogParams, ok bool) {
	line = bytes.TrimRight(line, "\r\n")
	n := len(line)
	if !bytes.HasPrefix(line, appLogPrefix) || n < len(appLogPrefix)+3 || string(line[n-3:]) != "}}]" {
		return p, false
	}
	obj := line[len(appLogPrefix) : n-3] // the members of params
	var seen [4]bool
	for i := 0; i < len(obj); {
		if i > 0 {
			if obj[i] != ',' {
				return p, false
			}
			i++
		}
		var key string
		var k int
		switch {
		case bytes.HasPrefix(obj[i:], []byte(`"appId":`)):
			key, k = "appId", 0
		case bytes.HasPrefix(obj[i:], []byte(`"log":`)):
			key, k = "log", 1
		case bytes.HasPrefix(obj[i:], []byte(`"error":`)):
			key, k = "error", 2
		case bytes.HasPrefix(obj[i:], []byte(`"stackTrace":`)):
			key, k = "stackTrace", 3
		default:
			return p, false
		}
		if seen[k] {
			return p, false // a duplicate: encoding/json keeps the last
		}
		seen[k] = true
		i += len(key) + 3
		if k == 2 {
			switch {
			case bytes.HasPrefix(obj[i:], []byte("true")):
				p.Error, i = true, i+4
			case bytes.HasPrefix(obj[i:], []byte("false")):
				i += 5
			default:
				return p, false
			}
			continue
		}
		s, end, ok := scanString(obj, i)
		if !ok {
			return p, false
		}
		switch k {
		case 0:
			p.AppID = s
		case 1:
			p.Log = s
		case 3:
			p.StackTrace = s
		}
		i = end
	}
	return p, seen[1]
}

// scanString decodes the JSON string starting at b[i] and returns it and
// the index past it. A string without escapes is copied as it is; one
// with escapes is decoded by encoding/json. ok is false for what is not a
// plain, valid JSON string (control bytes, invalid UTF-8, which
// encoding/json would replace).
func scanString(b []byte, i int) (s string, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			escaped = true
			j++
		case c == '"':
			raw := b[i+1 : j]
			if !utf8.Valid(raw) {
				return "", 0, false
			}
			if !escaped {
				return string(raw), j + 1, true
			}
			if json.Unmarshal(b[i:j+1], &s) != nil {
				return "", 0, false
			}
			return s, j + 1, true
		case c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

func parseMachineLine(line []byte) (machineMsg, bool) {
	line = bytes.TrimRight(line, "\r\n")
	n := len(line)
	if n < 4 || line[0] != '[' || line[1] != '{' || line[n-2] != '}' || line[n-1] != ']' {
		return machineMsg{}, false
	}
	var w machineWire
	if err := json.Unmarshal(line[1:n-1], &w); err != nil {
		return machineMsg{}, false
	}
	m := machineMsg{
		Event:  w.Event,
		Method: w.Method,
		ID:     nonNull(w.ID),
		Params: nonNull(w.Params),
		Result: nonNull(w.Result),
		Error:  string(w.Error),
		Trace:  string(w.Trace),
	}
	switch {
	case m.Event != "":
		m.Method, m.ID, m.Result, m.Error, m.Trace = "", nil, nil, "", ""
	case m.ID == nil:
		return machineMsg{}, false
	case m.Method != "":
		m.Result, m.Error, m.Trace = nil, "", ""
	default:
		m.Params = nil
		if m.Error != "" {
			m.Result = nil
		}
	}
	return m, true
}

// nonNull returns raw as a copy (json.Unmarshal's RawMessage may alias
// its input), or nil when it is absent or JSON null.
func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return bytes.Clone(raw)
}

// machineText is a string that accepts any JSON value: a string as is,
// null as "", anything else as its JSON text. flutter sends errors
// through _toJsonable, which gives a string in practice but need not.
type machineText string

func (t *machineText) UnmarshalJSON(raw []byte) error {
	var s string
	switch {
	case string(raw) == "null":
		*t = ""
	case json.Unmarshal(raw, &s) == nil:
		*t = machineText(s)
	default:
		*t = machineText(raw)
	}
	return nil
}

// intID returns the id of a response to one of flyd's requests, which
// are numbered by machineRequest.
func (m machineMsg) intID() (int, bool) {
	if m.Event != "" || m.ID == nil {
		return 0, false
	}
	id, err := strconv.Atoi(string(m.ID))
	return id, err == nil
}

// machineParams decodes m's params into a T. Missing params decode to
// T's zero value; unknown fields are ignored. An error means the params
// are malformed, not that the event did not happen.
func machineParams[T any](m machineMsg) (T, error) {
	var v T
	if m.Params == nil {
		return v, nil
	}
	if err := json.Unmarshal(m.Params, &v); err != nil {
		name := m.Event
		if name == "" {
			name = m.Method
		}
		return v, fmt.Errorf("decode %s params: %w", name, err)
	}
	return v, nil
}

// Event params. appId is the id from app.start; clients must not require
// it on app.dtd and app.devTools.
type (
	machineDaemonConnectedParams struct {
		Version string `json:"version"`
		PID     int    `json:"pid"`
	}
	machineLogMessageParams struct {
		Level      string `json:"level"` // status, warning, error or trace
		Message    string `json:"message"`
		StackTrace string `json:"stackTrace"`
	}
	machineAppStartParams struct {
		AppID           string `json:"appId"`
		DeviceID        string `json:"deviceId"`
		Directory       string `json:"directory"`
		SupportsRestart bool   `json:"supportsRestart"`
		LaunchMode      string `json:"launchMode"` // run or attach
		Mode            string `json:"mode"`       // debug, profile or release
	}
	// machineDebugPortParams is sent only in debug and profile mode.
	machineDebugPortParams struct {
		AppID   string `json:"appId"`
		Port    int    `json:"port"`
		WSURI   string `json:"wsUri"` // the VM service
		BaseURI string `json:"baseUri"`
	}
	machineDTDParams struct {
		AppID string `json:"appId"`
		URI   string `json:"uri"`
	}
	machineDevToolsParams struct {
		AppID string `json:"appId"`
		URI   string `json:"uri"`
	}
	machineWebLaunchURLParams struct {
		AppID    string `json:"appId"`
		URL      string `json:"url"`
		Launched bool   `json:"launched"`
	}
	// machineAppIDParams is the params of app.started, and of the app.stop
	// and app.detach requests.
	machineAppIDParams struct {
		AppID string `json:"appId"`
	}
	machineAppLogParams struct {
		AppID      string `json:"appId"`
		Log        string `json:"log"`
		Error      bool   `json:"error"`
		StackTrace string `json:"stackTrace"`
	}
	// machineProgressParams starts a progress entry (Finished false, with
	// Message) or ends the one with the same ID (Finished true, no
	// Message). Entries can overlap. ProgressID is "" (null), "hot.reload"
	// or "hot.restart".
	machineProgressParams struct {
		AppID      string `json:"appId"`
		ID         string `json:"id"`
		ProgressID string `json:"progressId"`
		Message    string `json:"message"`
		Finished   bool   `json:"finished"`
	}
	// machineAppStopParams has Error and Trace when the app failed (a
	// build failure, for one).
	machineAppStopParams struct {
		AppID string      `json:"appId"`
		Error machineText `json:"error"`
		Trace machineText `json:"trace"`
	}
	machineExposeURLParams struct {
		URL string `json:"url"`
	}
)

// Request params and results.
type (
	machineRestartParams struct {
		AppID       string `json:"appId"`
		FullRestart bool   `json:"fullRestart"`
		Pause       bool   `json:"pause,omitempty"`
		Reason      string `json:"reason,omitempty"`
		Debounce    bool   `json:"debounce,omitempty"`
	}
	// machineRestartResult is app.restart's result; a non-zero Code is a
	// failed reload or restart.
	machineRestartResult struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
)

// machineRequest encodes a request line for flutter's stdin:
// `[{"id":1,"method":"app.restart","params":{...}}]` and a newline.
// params is left out when nil. params must be encodable; flyd passes its
// own param structs, so a failure is a programming error and panics.
func machineRequest(id int, method string, params any) []byte {
	b, err := json.Marshal(struct {
		ID     int    `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params,omitempty"`
	}{id, method, params})
	if err != nil {
		panic(fmt.Sprintf("encode %s request: %v", method, err))
	}
	return frameMachine(b)
}

// machineResponse encodes flyd's answer to a request from flutter
// (app.exposeUrl): `[{"id":X,"result":...}]` and a newline, with id as
// flutter sent it. result must be encodable (see machineRequest).
func machineResponse(id json.RawMessage, result any) []byte {
	b, err := json.Marshal(struct {
		ID     json.RawMessage `json:"id"`
		Result any             `json:"result,omitempty"`
	}{id, result})
	if err != nil {
		panic(fmt.Sprintf("encode response %s: %v", id, err))
	}
	return frameMachine(b)
}

func frameMachine(obj []byte) []byte {
	line := make([]byte, 0, len(obj)+3)
	line = append(line, '[')
	line = append(line, obj...)
	return append(line, ']', '\n')
}

// writeStdin writes b to the process's stdin: ErrRunEnded without one.
func (r *Run) writeStdin(b []byte) error {
	if r.proc == nil || !r.proc.hasInput() {
		return ErrRunEnded
	}
	return r.proc.writeInput(b)
}

// request sends a --machine request to the app and waits for its reply.
func (r *Run) request(ctx context.Context, method string, params any) (machineMsg, error) {
	r.mu.Lock()
	if r.proc == nil || !r.proc.hasInput() || !r.live() {
		r.mu.Unlock()
		return machineMsg{}, ErrRunEnded
	}
	r.nextReq++
	id := r.nextReq
	ch := make(chan machineMsg, 1)
	r.pending[id] = ch
	r.mu.Unlock()
	if err := r.writeStdin(machineRequest(id, method, params)); err != nil {
		return machineMsg{}, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return machineMsg{}, ErrRunEnded
		}
		return m, nil
	case <-ctx.Done():
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
		return machineMsg{}, ctx.Err()
	}
}
