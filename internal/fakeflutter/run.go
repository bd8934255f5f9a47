package fakeflutter

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A trace shaped like the Dart stack flutter_tools sends with an error.
const daemonTrace = `#0      AppDomain.restart (package:flutter_tools/src/commands/daemon.dart:623:7)
#1      Domain.handleCommand.<anonymous closure> (package:flutter_tools/src/commands/daemon.dart:269:16)
#2      new Future.sync (dart:async/future.dart:311:31)
#3      Domain.handleCommand (package:flutter_tools/src/commands/daemon.dart:266:12)
#4      Daemon._handleRequest (package:flutter_tools/src/commands/daemon.dart:240:34)
`

// The domains flutter_tools registers; commands of the ones the fake does
// not model are "not understood".
var domains = map[string]bool{"daemon": true, "app": true, "device": true, "emulator": true, "devtools": true, "proxy": true}

// out serialises the stdout lines that the control loop and the log
// emitter write. Each line is written whole; the first write error is
// kept and later writes are dropped.
type out struct {
	mu    sync.Mutex
	w     *bufio.Writer
	err   error
	buf   bytes.Buffer
	muted bool // the tool is gone: nothing more reaches its stdout
}

func newOut(w io.Writer) *out { return &out{w: bufio.NewWriterSize(w, 64<<10)} }

// write writes b (a whole line with its newline) and flushes if asked.
func (o *out) write(b []byte, flush bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.muted {
		return
	}
	if o.err != nil {
		return
	}
	if _, o.err = o.w.Write(b); o.err == nil && flush {
		o.err = o.w.Flush()
	}
}

func (o *out) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = o.w.Flush()
	}
}

func (o *out) failed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err != nil
}

func (o *out) line(s string) { o.write([]byte(s+"\n"), true) }

// send writes v as one `[{...}]` line, compact and without HTML escaping,
// as Dart's jsonEncode does.
func (o *out) send(v any) {
	o.mu.Lock()
	o.buf.Reset()
	o.buf.WriteByte('[')
	enc := json.NewEncoder(&o.buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	b := bytes.TrimSuffix(o.buf.Bytes(), []byte("\n"))
	line := append(append([]byte(nil), b...), ']', '\n')
	o.mu.Unlock()
	if err != nil {
		panic(err) // the fake's own types always encode
	}
	o.write(line, true)
}

func (o *out) event(name string, params any) {
	o.send(struct {
		Event  string `json:"event"`
		Params any    `json:"params,omitempty"`
	}{name, params})
}

type (
	connectedParams struct {
		Version string `json:"version"`
		PID     int    `json:"pid"`
	}
	startParams struct {
		AppID           string `json:"appId"`
		DeviceID        string `json:"deviceId"`
		Directory       string `json:"directory"`
		SupportsRestart bool   `json:"supportsRestart"`
		LaunchMode      string `json:"launchMode"`
		Mode            string `json:"mode"`
	}
	progressParams struct {
		AppID      string  `json:"appId"`
		ID         string  `json:"id"`
		ProgressID *string `json:"progressId"`
		Message    string  `json:"message,omitempty"`
		Finished   bool    `json:"finished"`
	}
	debugPortParams struct {
		AppID string `json:"appId"`
		Port  int    `json:"port"`
		WSURI string `json:"wsUri"`
	}
	uriParams struct {
		AppID string `json:"appId,omitempty"`
		URI   string `json:"uri"`
	}
	webLaunchParams struct {
		AppID    string `json:"appId"`
		URL      string `json:"url"`
		Launched bool   `json:"launched"`
	}
	appIDParams struct {
		AppID string `json:"appId"`
	}
	logParams struct {
		AppID      string `json:"appId"`
		Log        string `json:"log"`
		Error      bool   `json:"error,omitempty"`
		StackTrace string `json:"stackTrace,omitempty"`
	}
	stopParams struct {
		AppID string `json:"appId"`
		Error string `json:"error,omitempty"`
		Trace string `json:"trace,omitempty"`
	}
	restartResult struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
)

// runner is one `flutter run --machine`. Its fields other than out are
// used only by the goroutine that called Main.
type runner struct {
	cfg         config
	out         *out
	stderr      io.Writer
	dev         device
	mode        string
	target      string
	flavor      string
	dir         string
	appID       string        // reported in app.start and in events
	acceptID    string        // what requests must name
	progress    int           // the next progress id
	vm          *vmService    // nil in release mode
	shutdown    bool          // daemon.shutdown came: requests are no longer read
	dtd         *dtdServer    // EnvDTD
	exited      chan struct{} // the app called exit (ext.flutter.exit)
	detachedApp bool          // app.detach came: the tool is gone, the app runs on
}

func run(cfg config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, map[string]string{
		"-d": "device", "--device-id": "device",
		"-t": "target", "--target": "target",
		"--flavor": "flavor", "--dart-define": "dart-define", "--dart-define-from-file": "dart-define-from-file",
		"--route": "route", "--web-port": "web-port", "--web-hostname": "web-hostname",
		"--device-vmservice-port": "device-vmservice-port", "--host-vmservice-port": "host-vmservice-port",
		"--use-application-binary": "use-application-binary",
	})
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\n%s\n", err, usageHint)
		return ExitUsage
	}
	if !f.has("--machine") {
		fmt.Fprintln(stderr, "fake flutter: only `flutter run --machine` is implemented")
		return ExitUsage
	}
	dev, ok := findDevice(cfg, f.last("device", ""))
	if !ok {
		if cfg.noDevices {
			fmt.Fprintln(stderr, "No supported devices connected.")
		} else {
			fmt.Fprintf(stderr, "No supported devices found with name or id matching '%s'.\n", f.last("device", ""))
		}
		return ExitFailure
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "fake flutter: %v\n", err)
		return ExitFailure
	}
	r := &runner{
		cfg:    cfg,
		out:    newOut(stdout),
		stderr: stderr,
		dev:    dev,
		mode:   mode(f, "debug"),
		target: f.last("target", defaultTarget),
		flavor: f.last("flavor", ""),
		dir:    dir,
		appID:  cfg.appID,
		exited: make(chan struct{}, 1),
	}
	if len(f.args) > 0 && !f.has("target") {
		r.target = f.args[0] // flutter run takes the target as an argument too
	}
	if r.appID == "" {
		r.appID = newUUID()
	}
	r.acceptID = r.appID
	if cfg.wrongAppID {
		r.acceptID = newUUID()
	}

	r.out.event("daemon.connected", connectedParams{ProtocolVersion, os.Getpid()})
	pid, err := startEffects(cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fake flutter: %v\n", err)
		return ExitFailure
	}
	if pid != 0 {
		r.out.line(fmt.Sprintf("grandchild pid %d", pid))
	}
	if code, ok := r.launch(); !ok {
		return code
	}
	return r.serve(stdin)
}

func (r *runner) debugging() bool { return r.mode != "release" }

func (r *runner) hot() bool { return r.mode == "debug" }

// launch prints everything from app.start to app.started, and reports
// false with the exit code if the build fails.
func (r *runner) launch() (int, bool) {
	r.out.event("app.start", startParams{
		AppID: r.appID, DeviceID: r.dev.ID, Directory: r.dir,
		SupportsRestart: r.hot(), LaunchMode: "run", Mode: r.mode,
	})
	r.out.line(fmt.Sprintf("Launching %s on %s in %s mode...", r.target, r.dev.Name, r.mode))

	var building, built, stopError string
	switch r.dev.category {
	case "mobile":
		task := "assemble" + title(r.flavor) + title(r.mode)
		apk := "build/app/outputs/flutter-apk/app-" + r.mode + ".apk"
		if r.flavor != "" {
			apk = "build/app/outputs/flutter-apk/app-" + r.flavor + "-" + r.mode + ".apk"
		}
		building = "Running Gradle task '" + task + "'..."
		built = "✓ Built " + apk
		stopError = "Gradle task " + task + " failed with exit code 1"
	case "desktop":
		building = "Building Linux application..."
		built = "✓ Built build/linux/x64/" + r.mode + "/bundle/" + projectName(r.dir)
		stopError = "Build process failed"
	case "web":
		building = "Waiting for connection from debug service on " + r.dev.Name + "..."
		stopError = "Failed to compile application for the Web."
	}
	id := r.startProgress(nil, building)
	time.Sleep(defaultBuildTime + r.cfg.startup)
	if r.cfg.buildFail {
		fmt.Fprint(r.stderr, compileError(r.target))
		r.finishProgress(id, nil)
		r.out.event("app.stop", stopParams{AppID: r.appID, Error: stopError, Trace: daemonTrace})
		return ExitFailure, false
	}
	r.finishProgress(id, nil)
	if built != "" {
		r.out.line(built)
	}
	if r.dev.category == "mobile" {
		id := r.startProgress(nil, "Installing "+strings.TrimPrefix(built, "✓ Built ")+"...")
		time.Sleep(5 * time.Millisecond)
		r.finishProgress(id, nil)
	}
	ws := fmt.Sprintf("ws://127.0.0.1:%d/%s/ws", port(), token())
	if r.debugging() {
		vm, err := startVMService(r.dir, r.reloadFromVM, appOptions{mode: r.mode, stamp: r.cfg.stamp, widgets: r.cfg.widgets, noScreenshot: r.cfg.noScreenshot, inspectorDelay: r.cfg.inspectorDelay,
			exit: func() {
				select {
				case r.exited <- struct{}{}:
				default:
				}
			}})
		if err != nil {
			fmt.Fprintf(r.stderr, "fake flutter: %v\n", err)
			return ExitFailure, false
		}
		r.vm, ws = vm, vm.wsURI()
		r.out.event("app.debugPort", debugPortParams{AppID: r.appID, Port: portOf(ws), WSURI: ws})
	}
	if r.dev.category == "web" {
		r.out.line("This app is linked to the debug service: " + ws)
		r.out.event("app.webLaunchUrl", webLaunchParams{
			AppID: r.appID, URL: fmt.Sprintf("http://localhost:%d", port()), Launched: r.dev.ID != "web-server",
		})
	} else if r.debugging() {
		id := r.startProgress(nil, "Syncing files to device "+r.dev.Name+"...")
		time.Sleep(5 * time.Millisecond)
		r.finishProgress(id, nil)
	}
	dtdURI := fmt.Sprintf("ws://127.0.0.1:%d/%s", port(), token())
	if r.cfg.dtd && r.vm != nil {
		d, err := startDTD(r.dir, r.vm.wsURI(), projectName(r.dir))
		if err != nil {
			fmt.Fprintf(r.stderr, "fake flutter: %v\n", err)
			return ExitFailure, false
		}
		r.dtd, dtdURI = d, d.uri()
	}
	r.out.event("app.dtd", uriParams{AppID: r.appID, URI: dtdURI})
	r.out.event("app.started", appIDParams{r.appID})
	if names := os.Getenv(EnvPrintEnv); names != "" {
		for _, k := range strings.Split(names, ",") {
			v, ok := os.LookupEnv(k)
			if !ok {
				v = "<unset>"
			}
			r.out.event("app.log", logParams{AppID: r.appID, Log: "flutter: env " + k + "=" + v})
		}
	}
	if r.debugging() {
		// flutter_tools sends this one without an appId.
		r.out.event("app.devTools", uriParams{URI: "http://127.0.0.1:9100"})
	}
	for _, k := range r.cfg.errorsAtStart {
		r.throw(k)
	}
	if r.vm != nil {
		r.vm.postFrame(true) // the first frame, drawn with (and after) those errors
	}
	return 0, true
}

// serve answers requests on stdin and lets the app print its log until
// the app is stopped or crashes, and returns the exit code.
func (r *runner) serve(stdin io.Reader) int {
	reqs := make(chan []byte)
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	if stdin == nil {
		close(readerDone)
		reqs = nil
	} else {
		// Owned by serve: it returns after quit is closed and stdin is
		// interrupted (see Main).
		go func() {
			defer close(readerDone)
			defer close(reqs)
			br := bufio.NewReader(stdin)
			for {
				line, err := br.ReadBytes('\n')
				if len(line) > 0 {
					select {
					case reqs <- line:
					case <-quit:
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	stopEmit := make(chan struct{})
	emitDone := make(chan struct{})
	crashed := make(chan struct{})
	// Owned by serve, which closes stopEmit and waits for emitDone.
	go func() {
		defer close(emitDone)
		r.emit(stopEmit, crashed)
	}()
	errorsDone := make(chan struct{})
	// Owned by serve, which closes stopEmit and waits for errorsDone.
	go func() {
		defer close(errorsDone)
		r.throwEvery(stopEmit)
	}()
	defer func() {
		close(stopEmit)
		<-emitDone
		<-errorsDone
		if r.dtd != nil {
			r.dtd.close()
		}
		if r.vm != nil {
			r.vm.close()
		}
		r.out.flush()
		close(quit)
		if interrupt(stdin) {
			<-readerDone
		}
	}()
	emitting := emitDone
	for {
		select {
		case line, ok := <-reqs:
			if !ok {
				// flutter keeps the app running when its stdin ends.
				reqs = nil
				continue
			}
			if code, exit := r.handle(line); exit {
				return code
			}
			if r.shutdown {
				reqs = nil
			}
			if r.detachedApp {
				r.appAlone()
				reqs = nil
			}
		case <-r.cfg.kill:
			return killedExitCode
		case <-r.exited:
			r.out.event("app.stop", appIDParams{r.appID})
			return 0
		case <-crashed:
			r.out.event("app.log", logParams{
				AppID:      r.appID,
				Log:        "[ERROR:flutter/runtime/dart_vm_initializer.cc(41)] Unhandled Exception: Bad state: fake crash",
				Error:      true,
				StackTrace: "#0      main.<anonymous closure> (package:app/main.dart:20:5)\n",
			})
			r.out.line("Lost connection to device.")
			return CrashExitCode
		case <-emitting:
			if r.out.failed() {
				return ExitFailure
			}
			emitting = nil
		}
	}
}

// appAlone is the app after its tool detached: the tool's stdout, DTD,
// DDS and services are gone; the app and its VM service run on until the
// process is killed or the app exits.
func (r *runner) appAlone() {
	r.out.flush()
	r.out.mu.Lock()
	r.out.muted = true
	r.out.mu.Unlock()
	if r.dtd != nil {
		r.dtd.close()
		r.dtd = nil
	}
}

// interrupt stops a read in progress on stdin and reports whether the
// reader can be waited for.
func interrupt(stdin io.Reader) bool {
	if stdin == nil {
		return false
	}
	if f, ok := stdin.(interface{ SetReadDeadline(time.Time) error }); ok {
		if f.SetReadDeadline(time.Now()) == nil {
			return true
		}
	}
	if _, ok := stdin.(*os.File); ok {
		return false // a blocking file: the process is about to exit anyway
	}
	if c, ok := stdin.(io.Closer); ok {
		c.Close()
		return true
	}
	return false
}

// emit prints the app's log lines until stop is closed, the line bound is
// reached, or the crash point is reached (then it closes crashed).
func (r *runner) emit(stop <-chan struct{}, crashed chan<- struct{}) {
	if r.cfg.quiet {
		if r.cfg.crashAfter == 0 {
			close(crashed)
		}
		return
	}
	prefix := []byte(`[{"event":"app.log","params":{"appId":`)
	prefix = strconv.AppendQuote(prefix, r.appID)
	prefix = append(prefix, `,"log":"flutter: tick `...)
	var line []byte
	n := 0
	if r.cfg.interval == 0 && r.cfg.lines >= 0 && r.cfg.crashAfter < 0 && !r.cfg.stamp {
		// A bounded flood: make every line first and write them in one
		// go, so that the reader's side is what a benchmark times, not
		// this process making lines on the same cores.
		var all []byte
		for n = 1; n <= r.cfg.lines; n++ {
			all = strconv.AppendInt(append(all, prefix...), int64(n), 10)
			all = append(all, "\"}}]\n"...)
		}
		r.out.write(all, true)
		return
	}
	start := time.Now()
	var timer *time.Timer
	for {
		// Print every line that is due.
		due := int(^uint(0) >> 1)
		if r.cfg.interval > 0 {
			due = int(time.Since(start)/r.cfg.interval) + 1
		}
		for ; n < due; n++ {
			if r.cfg.crashAfter >= 0 && n >= r.cfg.crashAfter {
				r.out.flush()
				close(crashed)
				return
			}
			if r.cfg.lines >= 0 && n >= r.cfg.lines {
				r.out.flush()
				return
			}
			line = strconv.AppendInt(append(line[:0], prefix...), int64(n+1), 10)
			if r.cfg.stamp {
				line = strconv.AppendInt(append(line, " at="...), time.Now().UnixNano(), 10)
			}
			line = append(line, "\"}}]\n"...)
			flush := r.cfg.interval > 0 || (n+1)%256 == 0
			r.out.write(line, flush)
			if r.vm != nil && r.cfg.interval > 0 { // the engine also writes print() to the VM's Stdout stream
				r.vm.print("tick " + strconv.Itoa(n+1))
			}
			if r.cfg.interval == 0 && (n+1)%256 == 0 {
				select {
				case <-stop:
					return
				default:
				}
				if r.out.failed() {
					return
				}
			}
		}
		if r.out.failed() {
			return
		}
		wait := time.Until(start.Add(time.Duration(n) * r.cfg.interval))
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-stop:
			return
		case <-timer.C:
		}
	}
}

func (r *runner) startProgress(progressID *string, message string) string {
	id := strconv.Itoa(r.progress)
	r.progress++
	r.out.event("app.progress", progressParams{AppID: r.appID, ID: id, ProgressID: progressID, Message: message})
	return id
}

func (r *runner) finishProgress(id string, progressID *string) {
	r.out.event("app.progress", progressParams{AppID: r.appID, ID: id, ProgressID: progressID, Finished: true})
}

// daemonError is an error answer to a request.
type daemonError string

// handle answers one stdin line and reports whether to exit, and how.
func (r *runner) handle(line []byte) (code int, exit bool) {
	line = bytes.TrimRight(line, "\r\n")
	if !bytes.HasPrefix(line, []byte("[{")) || !bytes.HasSuffix(line, []byte("}]")) {
		return 0, false // flutter ignores unframed input
	}
	inner := line[1 : len(line)-1]
	var req map[string]json.RawMessage
	if err := json.Unmarshal(inner, &req); err != nil {
		fmt.Fprintf(r.stderr, "Error decoding request: %v: %s\n", err, inner)
		return 0, false
	}
	id := req["id"]
	if len(id) == 0 || string(id) == "null" {
		fmt.Fprintf(r.stderr, "no id for request: %s\n", inner)
		return 0, false
	}
	var method string
	if err := json.Unmarshal(req["method"], &method); err != nil {
		method = string(req["method"])
	}
	var args map[string]any
	if p := req["params"]; len(p) > 0 {
		json.Unmarshal(p, &args) // not an object: no arguments, as flutter treats it
	}
	if args == nil {
		args = map[string]any{}
	}
	result, derr, exit := r.dispatch(method, args)
	if derr != "" {
		r.out.send(struct {
			ID    json.RawMessage `json:"id"`
			Error string          `json:"error"`
			Trace string          `json:"trace"`
		}{id, string(derr), daemonTrace})
		return 0, false
	}
	var raw json.RawMessage
	if result != nil {
		raw, _ = json.Marshal(result)
	}
	if exit || method == "app.detach" {
		// app.stop and app.detach: the app's stop event, then the answer.
		r.out.event("app.stop", appIDParams{r.appID})
	}
	r.out.send(struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result,omitempty"`
	}{id, raw})
	return 0, exit
}

// dispatch runs one request and returns its result (nil for void), or an
// error message, and whether the run ends.
func (r *runner) dispatch(method string, args map[string]any) (result any, err daemonError, exit bool) {
	domain, _, ok := strings.Cut(method, ".")
	if !ok {
		return nil, daemonError("method not understood: " + method), false
	}
	if !domains[domain] {
		return nil, daemonError("no domain for method: " + method), false
	}
	switch method {
	case "daemon.version":
		return ProtocolVersion, "", false
	case "daemon.shutdown":
		// Under run --machine it ends the daemon connection, not the app
		// (the reference's §6.2): serve stops reading stdin.
		r.shutdown = true
		return nil, "", false
	case "app.restart":
		appID, err := r.app(args)
		if err != "" {
			return nil, err, false
		}
		full, err := boolArg(args, "fullRestart")
		if err != "" {
			return nil, err, false
		}
		for _, name := range []string{"pause", "debounce"} {
			if _, err := boolArg(args, name); err != "" {
				return nil, err, false
			}
		}
		if _, err := stringArg(args, "reason", false); err != "" {
			return nil, err, false
		}
		if err := r.known(appID); err != "" {
			return nil, err, false
		}
		if !r.hot() {
			what := "Reload"
			if full {
				what = "Restart"
			}
			return nil, daemonError(fmt.Sprintf("Exception: %s is not supported in %s mode", what, r.mode)), false
		}
		return r.restart(full), "", false
	case "app.stop", "app.detach":
		appID, err := r.app(args)
		if err == "" {
			err = r.known(appID)
		}
		if err != "" {
			return nil, err, false
		}
		if method == "app.detach" && r.vm != nil {
			// The tool exits and the app runs on (serve goes on as the
			// app alone); without a VM service there is nothing left to
			// model, so the fake exits.
			r.detachedApp = true
			r.vm.detached() // its services go before it answers, so none is left to a client that heard the answer
			return true, "", false
		}
		return true, "", true
	case "app.callServiceExtension":
		appID, err := r.app(args)
		if err == "" {
			err = r.known(appID)
		}
		if err != "" {
			return nil, err, false
		}
		name, err := stringArg(args, "methodName", true)
		if err != "" {
			return nil, err, false
		}
		res := map[string]any{"type": "_extensionType", "method": name}
		if p, ok := args["params"].(map[string]any); ok {
			for k, v := range p {
				res[k] = v
			}
		}
		return res, "", false
	}
	return nil, daemonError("command not understood: " + method), false
}

func (r *runner) app(args map[string]any) (string, daemonError) {
	return stringArg(args, "appId", true)
}

func (r *runner) known(appID string) daemonError {
	if appID != r.acceptID {
		return daemonError("app '" + appID + "' not found")
	}
	return ""
}

func (r *runner) restart(full bool) restartResult {
	kind, doing := "hot.reload", "Performing hot reload..."
	if full {
		kind, doing = "hot.restart", "Performing hot restart..."
	}
	id := r.startProgress(&kind, doing)
	time.Sleep(10 * time.Millisecond)
	if r.cfg.reloadFail {
		fmt.Fprint(r.stderr, compileError(r.target))
		r.finishProgress(id, &kind)
		return restartResult{1, "Try again after fixing the above error(s)."}
	}
	if r.cfg.reject && !full {
		fmt.Fprintf(r.stderr, "Hot reload was rejected:\n%s\n", rejectReason)
		r.finishProgress(id, &kind)
		return restartResult{1, "Reload rejected: " + rejectReason}
	}
	res := restartResult{Code: 0}
	r.reloaded(full)
	if full {
		r.out.line("Restarted application in 1,034ms.")
	} else {
		r.out.line("Reloaded 1 of 812 libraries in 412ms (compile: 35 ms, reload: 160 ms, reassemble: 170 ms).")
		res.Message = "Reloaded 1 of 812 libraries"
	}
	r.finishProgress(id, &kind)
	return res
}

func stringArg(args map[string]any, name string, required bool) (string, daemonError) {
	v, ok := args[name]
	if !ok {
		if required {
			return "", daemonError(name + " is required")
		}
		return "", ""
	}
	if v == nil {
		return "", ""
	}
	s, ok := v.(string)
	if !ok {
		return "", daemonError(name + " is not a String")
	}
	return s, ""
}

func boolArg(args map[string]any, name string) (bool, daemonError) {
	v, ok := args[name]
	if !ok || v == nil {
		return false, ""
	}
	b, ok := v.(bool)
	if !ok {
		return false, daemonError(name + " is not a bool")
	}
	return b, ""
}

// rejectReason is why the VM rejects a reload (EnvReloadReject), in its
// words.
const rejectReason = "Const class cannot become non-const: Library:'package:app/main.dart' Class: MyHomePage"

func compileError(target string) string {
	return target + ":12:3: Error: Expected ';' after this.\n" +
		"  runApp(const MyApp())\n" +
		"  ^\n"
}

// newUUID returns a random UUID v4, as flutter's app ids are.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func port() int { return 30000 + mrand.IntN(30000) }

func portOf(uri string) int {
	rest := uri[strings.LastIndex(uri, ":")+1:]
	n, _ := strconv.Atoi(rest[:strings.Index(rest, "/")])
	return n
}

// token is the random path segment of a VM service or DTD URI.
func token() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, 11, 12)
	for i := range b {
		b[i] = alphabet[mrand.IntN(len(alphabet))]
	}
	return string(append(b, '='))
}

// throw makes the app throw a framework error of kind: a Flutter.Error
// on the VM service, or on the web, where structured errors are off, the
// text block in the app's log.
func (r *runner) throw(kind string) {
	switch {
	case r.vm == nil:
	case r.dev.category == "web":
		r.out.event("app.log", logParams{AppID: r.appID, Log: r.vm.nextErrorText(kind)})
	default:
		r.vm.postError(kind)
	}
}

// throwEvery throws an error every errorEvery until stop is closed.
func (r *runner) throwEvery(stop <-chan struct{}) {
	if r.cfg.errorEvery <= 0 || r.vm == nil {
		return
	}
	kind := ErrorOverflow
	if len(r.cfg.errorsAtStart) > 0 {
		kind = r.cfg.errorsAtStart[0]
	}
	t := time.NewTicker(r.cfg.errorEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.throw(kind)
		}
	}
}

// reloaded is what a reload or restart does to the running app: the
// framework resets its error count (a restart starts a new isolate), and
// the app throws the errors it throws after each reload.
func (r *runner) reloaded(full bool) {
	if r.vm == nil {
		return
	}
	r.vm.reloaded(full)
	for _, k := range r.cfg.errorsOnReload {
		r.throw(k)
	}
	r.vm.postFrame(full) // the frame drawn with the new code
}

// reloadFromVM is a reload asked through the VM service (the services
// flutter_tools registers, s0.reloadSources and s0.hotRestart), which
// does not go through the daemon protocol's progress events.
func (r *runner) reloadFromVM(full bool) bool {
	if r.cfg.reloadFail || (r.cfg.reject && !full) {
		return false
	}
	r.reloaded(full)
	return true
}
