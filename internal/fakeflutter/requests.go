package fakeflutter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// This file holds the daemon protocol's requests on stdin: framing, dispatch, arguments.

// The domains flutter_tools registers; commands of the ones the fake does
// not model are "not understood".
var domains = map[string]bool{"daemon": true, "app": true, "device": true, "emulator": true, "devtools": true, "proxy": true}

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
