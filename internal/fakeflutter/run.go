package fakeflutter

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// This file holds the run's lifecycle: flags, launch, serving stdin, and the run's end.

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
		r.out.event("app.stop", stopParams{AppID: r.appID, Error: stopError, Trace: launchTrace})
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
			// The log ended, or stdout broke: flutter_tools on a broken
			// stdout runs on deaf (the app too), as on stdin's end.
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

func (r *runner) startProgress(progressID *string, message string) string {
	id := strconv.Itoa(r.progress)
	r.progress++
	r.out.event("app.progress", progressParams{AppID: r.appID, ID: id, ProgressID: progressID, Message: message})
	return id
}

func (r *runner) finishProgress(id string, progressID *string) {
	r.out.event("app.progress", progressParams{AppID: r.appID, ID: id, ProgressID: progressID, Finished: true})
}
