package fakeflutter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/fly-dev/fly/internal/fileuri"
)

// vmService is the fake app's VM service as DDS fronts it (the
// vm-service-protocol reference, §1 and §7): JSON-RPC over a WebSocket at
// ws://127.0.0.1:PORT/TOKEN=/ws, the core RPCs, streams with DDS's
// history of Extension, Logging, Stdout and Stderr (replayed on a
// client's first streamListen), the Service stream's registrations of
// flutter_tools' reloadSources and hotRestart, and Flutter.Error events
// built like the framework's (§2). Its methods may be called
// concurrently; close stops its server and waits for its connections.
type vmService struct {
	ln     net.Listener
	srv    *http.Server
	token  string
	root   string // the project, for the error-causing widget's location
	pkg    string // its package name, for stack frames
	reload func(full bool) bool

	mu             sync.Mutex
	clients        map[*vmClient]bool
	history        map[string][]json.RawMessage // per history stream, oldest first
	isolate        int                          // the UI isolate's number: a hot restart makes a new one
	sinceLoad      int                          // errorsSinceReload
	ids            int                          // the last inspector-N valueId
	frames         int                          // frames drawn
	toolGone       bool                         // the flutter tool detached: its services and DDS are gone, the app runs on
	inspectorReady bool                         // the inspector's extensions are registered
	inspectorTimer *time.Timer                  // registers them late (EnvInspectorDelayMS)
	stamp          bool                         // EnvStamp: summaries end with " at=<unix ns>"
	started        int64                        // the VM's startTime, ms since the epoch: with the pid, what tells this VM from another
	app            appOptions
}

// vmClient is one connection and the streams it listens to.
type vmClient struct {
	c       *websocket.Conn
	writeMu sync.Mutex
	streams map[string]bool // guarded by vmService.mu
	replay  [][]byte        // what a streamListen replays after its answer; serve's only
}

// historyStreams are the streams DDS keeps (§1.7), and historyMax how
// many events of each.
var historyStreams = map[string]bool{"Extension": true, "Logging": true, "Stdout": true, "Stderr": true}

const historyMax = 10000

// startVMService listens on a free loopback port. reload performs a hot
// reload or restart for a client that calls the registered services and
// reports whether it succeeded.
func startVMService(root string, reload func(full bool) bool, app appOptions) (*vmService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("vm service: %w", err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	v := &vmService{ln: ln, token: base64.URLEncoding.EncodeToString(b), root: root, pkg: projectName(root), reload: reload,
		clients: map[*vmClient]bool{}, history: map[string][]json.RawMessage{}, isolate: 4419843374421743, app: app, stamp: app.stamp,
		started: time.Now().UnixMilli()}
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve), ReadHeaderTimeout: 10 * time.Second}
	if app.inspectorDelay > 0 {
		v.inspectorTimer = time.AfterFunc(app.inspectorDelay, v.registerInspector) // stopped by close
	} else {
		v.inspectorReady = true
	}
	go v.srv.Serve(ln) // owned by v: close shuts it down
	return v, nil
}

// wsURI is the WebSocket URI app.debugPort reports.
func (v *vmService) wsURI() string {
	return "ws://" + v.ln.Addr().String() + "/" + v.token + "/ws"
}

// close stops the server and ends every connection.
func (v *vmService) close() {
	if v.inspectorTimer != nil {
		v.inspectorTimer.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v.mu.Lock()
	for c := range v.clients {
		c.c.CloseNow()
	}
	v.mu.Unlock()
	_ = v.srv.Shutdown(ctx)
}

func (v *vmService) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/"+v.token+"/ws" {
		http.NotFound(w, r)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	cl := &vmClient{c: c, streams: map[string]bool{}}
	v.mu.Lock()
	v.clients[cl] = true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		delete(v.clients, cl)
		v.mu.Unlock()
		c.CloseNow()
	}()
	serveRPC(r.Context(), c, cl.write, func(method string, params json.RawMessage) (any, *rpcError) {
		return v.call(cl, method, params)
	}, func() {
		for _, m := range cl.replay { // after the answer, as DDS sends it
			cl.write(m)
		}
		cl.replay = nil
	})
}

// serveRPC answers JSON-RPC requests on c until it ends: answer gives each
// result or error, write sends, and after runs once each answer is sent.
func serveRPC(ctx context.Context, c *websocket.Conn, write func([]byte), answer func(method string, params json.RawMessage) (any, *rpcError), after func()) {
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(data, &req) != nil {
			continue
		}
		res, rerr := answer(req.Method, req.Params)
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rerr != nil {
			msg["error"] = rerr
		} else {
			msg["result"] = res
		}
		b, _ := json.Marshal(msg)
		write(b)
		if after != nil {
			after()
		}
	}
}

func (cl *vmClient) write(b []byte) {
	cl.writeMu.Lock()
	defer cl.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cl.c.Write(ctx, websocket.MessageText, b) != nil {
		cl.c.CloseNow()
	}
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// isolateRef is an isolate as events and results name it.
func isolateRef(number int) map[string]any {
	n := strconv.Itoa(number)
	return map[string]any{"type": "@Isolate", "id": "isolates/" + n, "number": n, "name": "main", "isSystemIsolate": false, "isolateGroupId": "isolateGroups/1"}
}

func (v *vmService) call(cl *vmClient, method string, raw json.RawMessage) (any, *rpcError) {
	var p map[string]any
	_ = json.Unmarshal(raw, &p)
	str := func(k string) string { s, _ := p[k].(string); return s }
	v.mu.Lock()
	number := v.isolate
	v.mu.Unlock()
	iso := isolateRef(number)
	switch method {
	case "getVersion":
		return map[string]any{"type": "Version", "major": 4, "minor": 16}, nil
	case "getDartDevelopmentServiceVersion":
		if v.gone() {
			return nil, &rpcError{Code: -32601, Message: "Method not found"}
		}
		return map[string]any{"type": "Version", "major": 2, "minor": 0}, nil
	case "reloadSources": // the VM's own, as flutter attach calls it after recompiling
		if str("isolateId") != iso["id"] || v.reload == nil || !v.reload(false) {
			return map[string]any{"type": "ReloadReport", "success": false}, nil
		}
		return map[string]any{"type": "ReloadReport", "success": true}, nil
	case "_flutter.runInView": // a hot restart's new isolate, as flutter attach starts it
		if v.reload == nil || !v.reload(true) {
			return nil, &rpcError{Code: -32000, Message: "Server error"}
		}
		return map[string]any{"type": "Success"}, nil
	case "getVM":
		return map[string]any{"type": "VM", "name": "vm", "architectureBits": 64, "hostCPU": "fake", "operatingSystem": "linux",
			"targetCPU": "x64", "version": "3.9.0 (stable)", "pid": os.Getpid(), "startTime": v.started,
			"isolates": []any{iso}, "isolateGroups": []any{}, "systemIsolates": []any{}, "systemIsolateGroups": []any{}}, nil
	case "getIsolate":
		if str("isolateId") != iso["id"] {
			return map[string]any{"type": "Sentinel", "kind": "Collected", "valueAsString": "<collected>"}, nil
		}
		out := map[string]any{"type": "Isolate", "runnable": true, "livePorts": 1, "pauseOnExit": false,
			"extensionRPCs": v.extensions()}
		for k, val := range iso {
			if k != "type" {
				out[k] = val
			}
		}
		return out, nil
	case "_flutter.listViews":
		return map[string]any{"type": "FlutterViewList", "views": []any{map[string]any{"type": "FlutterView", "id": "_flutterView/0x1",
			"isolate": map[string]any{"type": "@Isolate", "fixedId": true, "id": iso["id"], "name": "main.dart$main-" + iso["number"].(string), "number": number}}}}, nil
	case "streamListen":
		return v.listen(cl, str("streamId"))
	case "streamCancel":
		v.mu.Lock()
		defer v.mu.Unlock()
		if !cl.streams[str("streamId")] {
			return nil, &rpcError{Code: 104, Message: "Stream not subscribed"}
		}
		delete(cl.streams, str("streamId"))
		return map[string]any{"type": "Success"}, nil
	case "getStreamHistory":
		s := str("stream")
		if !historyStreams[s] {
			return nil, &rpcError{Code: -32602, Message: "Invalid params", Data: map[string]any{"details": "Event history is not collected for stream '" + s + "'"}}
		}
		v.mu.Lock()
		h := append([]json.RawMessage{}, v.history[s]...)
		v.mu.Unlock()
		return map[string]any{"type": "StreamHistory", "history": h}, nil
	case "_flutter.screenshot":
		return v.app.screenshot()
	case "ext.flutter.exit":
		if str("isolateId") != iso["id"] {
			return nil, &rpcError{Code: -32601, Message: "Method not found"}
		}
		if v.app.exit != nil {
			v.app.exit()
		}
		return map[string]any{"type": "_extensionType", "method": method}, nil
	case "ext.flutter.inspector.getRootWidgetTree", "ext.flutter.inspector.disposeGroup":
		if str("isolateId") != iso["id"] || !slices.Contains(v.extensions(), method) {
			return nil, &rpcError{Code: -32601, Message: "Method not found"}
		}
		if method == "ext.flutter.inspector.disposeGroup" {
			return map[string]any{"type": "_extensionType", "method": method}, nil
		}
		return v.app.widgetTree(v.root, str("groupName"), str("isSummaryTree") == "true")
	case "s0.reloadSources", "s0.hotRestart":
		if v.gone() {
			return nil, &rpcError{Code: -32601, Message: "Method not found"}
		}
		if v.reload == nil || !v.reload(method == "s0.hotRestart") {
			return nil, &rpcError{Code: -32603, Message: "Unable to reload sources"}
		}
		return map[string]any{"type": "Success"}, nil
	}
	return nil, &rpcError{Code: -32601, Message: "Method not found"}
}

// listen subscribes cl to a stream, replaying what DDS keeps of it (its
// history, or the Service stream's registrations).
func (v *vmService) listen(cl *vmClient, stream string) (any, *rpcError) {
	v.mu.Lock()
	if cl.streams[stream] {
		v.mu.Unlock()
		return nil, &rpcError{Code: 103, Message: "Stream already subscribed", Data: map[string]any{"details": "The stream '" + stream + "' is already subscribed"}}
	}
	cl.streams[stream] = true
	var replay []json.RawMessage
	switch {
	case historyStreams[stream]:
		replay = append(replay, v.history[stream]...)
	case stream == "Service" && !v.toolGone:
		for _, s := range []string{"reloadSources", "hotRestart"} {
			replay = append(replay, v.eventLocked(map[string]any{"kind": "ServiceRegistered", "service": s, "method": "s0." + s, "alias": "Flutter Tools"}, 0))
		}
	}
	v.mu.Unlock()
	for _, e := range replay {
		cl.replay = append(cl.replay, notification(stream, e))
	}
	return map[string]any{"type": "Success"}, nil
}

// eventLocked builds an event: fields in the VM's order (type, kind,
// extensionKind, isolate, timestamp, the rest), of isolate number iso (0
// for none).
func (v *vmService) eventLocked(fields map[string]any, iso int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"Event","kind":`)
	k, _ := json.Marshal(fields["kind"])
	b.Write(k)
	if ek, ok := fields["extensionKind"]; ok {
		e, _ := json.Marshal(ek)
		b.WriteString(`,"extensionKind":`)
		b.Write(e)
	}
	if iso != 0 {
		i, _ := json.Marshal(isolateRef(iso))
		b.WriteString(`,"isolate":`)
		b.Write(i)
	}
	fmt.Fprintf(&b, `,"timestamp":%d`, time.Now().UnixMilli())
	for _, key := range []string{"service", "method", "alias", "bytes", "extensionRPC", "extensionData"} {
		if val, ok := fields[key]; ok {
			e, _ := json.Marshal(val)
			fmt.Fprintf(&b, `,%q:`, key)
			b.Write(e)
		}
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
}

func notification(stream string, event json.RawMessage) []byte {
	s, _ := json.Marshal(stream)
	return []byte(`{"jsonrpc":"2.0","method":"streamNotify","params":{"streamId":` + string(s) + `,"event":` + string(event) + `}}`)
}

// post sends an event to every client listening to stream, and keeps it
// in the stream's history when DDS would.
func (v *vmService) post(stream string, fields map[string]any) {
	v.mu.Lock()
	iso := v.isolate
	if stream == "Service" {
		iso = 0
	}
	e := v.eventLocked(fields, iso)
	if bytes.Contains(e, []byte(stampHere)) { // the time it is sent, not when it was built
		e = bytes.ReplaceAll(e, []byte(stampHere), strconv.AppendInt(nil, time.Now().UnixNano(), 10))
	}
	if historyStreams[stream] {
		h := append(v.history[stream], e)
		if len(h) > historyMax {
			h = h[len(h)-historyMax:]
		}
		v.history[stream] = h
	}
	var to []*vmClient
	for c := range v.clients {
		if c.streams[stream] {
			to = append(to, c)
		}
	}
	v.mu.Unlock()
	msg := notification(stream, e)
	for _, c := range to {
		c.write(msg)
	}
}

func (v *vmService) gone() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.toolGone
}

// detached is what the app's VM service sees when the flutter tool
// detaches (the reference's §5): the services it registered go, with its
// DDS; the VM service itself stays, at the same address.
func (v *vmService) detached() {
	v.mu.Lock()
	v.toolGone = true
	v.mu.Unlock()
	for _, s := range []string{"reloadSources", "hotRestart"} {
		v.post("Service", map[string]any{"kind": "ServiceUnregistered", "service": s, "method": "s0." + s, "alias": "Flutter Tools"})
	}
}

// stampHere stands for the time an event is sent (EnvStamp).
const stampHere = "STAMP_AT_SEND"

// postFrame posts the Flutter.Frame event the framework posts after each
// frame (and Flutter.FirstFrame before the first of an isolate).
func (v *vmService) postFrame(first bool) {
	v.mu.Lock()
	v.frames++
	n := v.frames
	v.mu.Unlock()
	if first {
		v.post("Extension", map[string]any{"kind": "Extension", "extensionKind": "Flutter.FirstFrame", "extensionData": map[string]any{}})
	}
	v.post("Extension", map[string]any{"kind": "Extension", "extensionKind": "Flutter.Frame", "extensionData": map[string]any{
		"number": n, "startTime": time.Now().UnixMicro(), "elapsed": 8123, "build": 2311, "raster": 3412, "vsyncOverhead": 402}})
}

// print is the app's print() on the VM's Stdout stream: two WriteEvents,
// the text and "\n", as the engine sends them.
func (v *vmService) print(text string) {
	v.post("Stdout", map[string]any{"kind": "WriteEvent", "bytes": base64.StdEncoding.EncodeToString([]byte(text))})
	v.post("Stdout", map[string]any{"kind": "WriteEvent", "bytes": base64.StdEncoding.EncodeToString([]byte("\n"))})
}

// reloaded resets the error count, as the framework's reassemble does;
// a hot restart also replaces the UI isolate.
func (v *vmService) reloaded(full bool) {
	v.mu.Lock()
	v.sinceLoad = 0
	old := v.isolate
	if full {
		v.isolate++
	}
	cur := v.isolate
	v.mu.Unlock()
	if full {
		v.postIsolate("IsolateExit", old)
		v.postIsolate("IsolateStart", cur)
		v.postIsolate("IsolateRunnable", cur)
	}
}

func (v *vmService) postIsolate(kind string, n int) {
	v.postIsolateEvent(map[string]any{"kind": kind}, n)
}

// postIsolateEvent sends an event of isolate n to the Isolate stream.
func (v *vmService) postIsolateEvent(fields map[string]any, n int) {
	v.mu.Lock()
	e := v.eventLocked(fields, n)
	var to []*vmClient
	for c := range v.clients {
		if c.streams["Isolate"] {
			to = append(to, c)
		}
	}
	v.mu.Unlock()
	for _, c := range to {
		c.write(notification("Isolate", e))
	}
}

// Error kinds the fake app can throw, named by the Env*Errors variables.
const (
	ErrorOverflow  = "overflow"  // a RenderFlex overflow during layout (reference §2.2)
	ErrorNullCheck = "nullcheck" // a null check in a gesture callback (§2.3)
	ErrorBuild     = "build"     // an exception while building a widget (§2.4)
)

// postError posts a Flutter.Error of kind on the Extension stream: the
// first since a reload with the whole rendered text, later ones as
// "Another exception was thrown: <summary>".
func (v *vmService) postError(kind string) {
	v.mu.Lock()
	since := v.sinceLoad
	v.sinceLoad++
	id := func() string { v.ids++; return "inspector-" + strconv.Itoa(v.ids) }
	data := flutterError(kind, v.root, v.pkg, id)
	stamp := v.stamp
	v.mu.Unlock()
	if stamp { // EnvStamp: the summary ends with when the app threw it
		summary := data["summary"].(string)
		stamped := summary + " at=" + stampHere // post writes the time over it
		data["summary"] = stamped
		data["renderedErrorText"] = strings.Replace(data["renderedErrorText"].(string), summary, stamped, 1)
		for _, p := range data["properties"].([]any) {
			if n := p.(map[string]any); n["type"] == "ErrorSummary" {
				n["description"] = stamped
			}
		}
	}
	data["errorsSinceReload"] = since
	if since > 0 {
		data["renderedErrorText"] = "Another exception was thrown: " + data["summary"].(string)
	}
	delete(data, "summary")
	v.post("Extension", map[string]any{"kind": "Extension", "extensionKind": "Flutter.Error", "extensionData": data})
}

// nextErrorText is the text the app prints for an error of kind where
// structured errors are off (web): the whole block for the first since a
// reload, then "Another exception was thrown: <summary>".
func (v *vmService) nextErrorText(kind string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	since := v.sinceLoad
	v.sinceLoad++
	n := 0
	d := flutterError(kind, v.root, v.pkg, func() string { n++; return "inspector-" + strconv.Itoa(n) })
	if since > 0 {
		return "Another exception was thrown: " + d["summary"].(string)
	}
	return d["renderedErrorText"].(string)
}

// flutterError is the extensionData of a first Flutter.Error of kind,
// with a "summary" key the caller removes.
func flutterError(kind, root, pkg string, id func() string) map[string]any {
	main := fileuri.FromPath(filepath.Join(root, "lib", "main.dart"))
	node := func(typ, desc string, extra map[string]any) map[string]any {
		n := map[string]any{"description": desc, "type": typ, "showSeparator": false, "showName": false, "style": "flat",
			"allowNameWrap": true, "valueId": id(), "properties": []any{}, "children": []any{}, "defaultValue": "null",
			"missingIfNull": false, "propertyType": "List<Object>", "defaultLevel": "info"}
		for k, val := range extra {
			n[k] = val
		}
		return n
	}
	spacer := map[string]any{"description": "", "type": "ErrorSpacer", "name": "", "showName": false, "style": "singleLine",
		"allowNameWrap": true, "valueId": nil, "properties": []any{}, "children": []any{}, "missingIfNull": false, "propertyType": "void", "defaultLevel": "info", "value": nil}
	summaryNode := func(s string) map[string]any {
		return node("ErrorSummary", s, map[string]any{"level": "summary", "defaultLevel": "summary"})
	}
	widget := func(desc string) map[string]any {
		return map[string]any{"description": "", "type": "DiagnosticsBlock", "name": "The relevant error-causing widget was", "style": "whitespace",
			"hasChildren": true, "allowWrap": false, "valueId": nil, "properties": []any{}, "children": []any{node("ErrorDescription", desc, nil)}}
	}
	stack := func(frames ...string) map[string]any {
		var props []any
		for _, f := range frames {
			props = append(props, map[string]any{"description": f, "type": "DiagnosticsProperty<void>", "name": "", "showName": false, "style": "singleLine",
				"allowWrap": false, "allowNameWrap": true, "valueId": nil, "properties": []any{}, "children": []any{}, "missingIfNull": false,
				"propertyType": "void", "defaultLevel": "info", "value": nil})
		}
		return map[string]any{"description": "", "type": "DiagnosticsStackTrace", "name": "When the exception was thrown, this was the stack",
			"style": "flat", "allowWrap": false, "valueId": id(), "properties": props, "children": []any{}}
	}
	header := func(library string) string {
		h := "══╡ EXCEPTION CAUGHT BY " + strings.ToUpper(library) + " ╞"
		return h + strings.Repeat("═", max(0, 100-len([]rune(h))))
	}
	footer := strings.Repeat("═", 100)
	var library, summary string
	var props []any
	var text []string
	switch kind {
	case ErrorNullCheck:
		library, summary = "gesture", "Null check operator used on a null value"
		frame0 := "#0      _HomePage.build.<anonymous closure> (package:" + pkg + "/main.dart:31:28)"
		frame1 := "#1      _InkResponseState.handleTap (package:flutter/src/material/ink_well.dart:1224:21)"
		props = []any{node("ErrorDescription", "The following _TypeError was thrown while handling a gesture:", nil), summaryNode(summary), spacer, stack(frame0, frame1)}
		text = []string{"The following _TypeError was thrown while handling a gesture:", summary, "", "When the exception was thrown, this was the stack:", frame0, frame1}
	case ErrorBuild:
		library, summary = "widgets library", "Exception: Oops"
		loc := "MyBrokenHomePage MyBrokenHomePage:" + main + ":11:13"
		frame0 := "#0      MyBrokenHomePage._throwAnException (package:" + pkg + "/main.dart:26:5)"
		frame1 := "#1      MyBrokenHomePage.build (package:" + pkg + "/main.dart:21:5)"
		props = []any{node("ErrorDescription", "The following _Exception was thrown building MyBrokenHomePage(dirty):", nil), summaryNode(summary), spacer,
			widget(loc), spacer, stack(frame0, frame1)}
		text = []string{"The following _Exception was thrown building MyBrokenHomePage(dirty):", summary, "", "The relevant error-causing widget was:", "  " + loc, "",
			"When the exception was thrown, this was the stack:", frame0, frame1}
	default: // ErrorOverflow
		library, summary = "rendering library", "A RenderFlex overflowed by 42 pixels on the right."
		loc := "Row Row:" + main + ":30:12"
		props = []any{node("ErrorDescription", "The following assertion was thrown during layout:", nil), summaryNode(summary), spacer, widget(loc), spacer,
			node("ErrorDescription", "The overflowing RenderFlex has an orientation of Axis.horizontal.", nil)}
		text = []string{"The following assertion was thrown during layout:", summary, "", "The relevant error-causing widget was:", "  " + loc, "",
			"The overflowing RenderFlex has an orientation of Axis.horizontal."}
	}
	return map[string]any{
		"description": "Exception caught by " + library, "type": "_FlutterErrorDetailsNode", "allowWrap": false, "valueId": id(),
		"properties": props, "children": []any{},
		"renderedErrorText": header(library) + "\n" + strings.Join(text, "\n") + "\n" + footer,
		"summary":           summary,
	}
}
