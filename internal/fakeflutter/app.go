package fakeflutter

import (
	"strconv"
	"time"
)

// This file holds the running app: its log lines, framework errors, reloads, compile errors.

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

// rejectReason is why the VM rejects a reload (EnvReloadReject), in its
// words.
const rejectReason = "Const class cannot become non-const: Library:'package:app/main.dart' Class: MyHomePage"

func compileError(target string) string {
	return target + ":12:3: Error: Expected ';' after this.\n" +
		"  runApp(const MyApp())\n" +
		"  ^\n"
}
