package fakeflutter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// attach is `flutter attach --machine --debug-uri URI` (the reference's
// §5): it connects to a running app's VM service and speaks the same
// daemon protocol as run --machine, launchMode attach. A hot reload is the
// VM's own reloadSources (after the recompile the real tool does), a hot
// restart a new isolate (_flutter.runInView). app.detach leaves the app
// running; app.stop ends it (ext.flutter.exit). stdin EOF does not stop
// it. It ends when the app's VM service goes away.
func attach(cfg config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, map[string]string{
		"-d": "device", "--device-id": "device", "--debug-uri": "debug-uri", "--debug-url": "debug-uri",
		"-t": "target", "--target": "target", "--app-id": "app-id", "--dds-port": "dds-port",
	})
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\n%s\n", err, usageHint)
		return ExitUsage
	}
	if !f.has("--machine") {
		fmt.Fprintln(stderr, "fake flutter: only `flutter attach --machine` is implemented")
		return ExitUsage
	}
	ws, err := attachWS(f.last("debug-uri", ""))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitUsage
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dial, dialCancel := context.WithTimeout(ctx, 10*time.Second)
	c, _, err := websocket.Dial(dial, ws, nil)
	dialCancel()
	if err != nil {
		fmt.Fprintf(stderr, "Error connecting to the service protocol: %v\n", err)
		return ExitFailure
	}
	defer c.CloseNow()
	vm := &vmCaller{c: c, calls: map[string]chan json.RawMessage{}, done: make(chan struct{})}
	go vm.read(ctx) // owned by attach: ends with the connection
	var vmInfo struct {
		Isolates []struct {
			ID string `json:"id"`
		} `json:"isolates"`
	}
	if err := vm.call(ctx, "getVM", nil, &vmInfo); err != nil || len(vmInfo.Isolates) == 0 {
		fmt.Fprintf(stderr, "Error connecting to the service protocol: no isolate (%v)\n", err)
		return ExitFailure
	}
	dir, _ := os.Getwd()
	out := newOut(stdout)
	appID := cfg.appID
	if appID == "" {
		appID = newUUID()
	}
	out.event("daemon.connected", connectedParams{ProtocolVersion, os.Getpid()})
	out.event("app.start", map[string]any{"appId": appID, "deviceId": f.last("device", "linux"), "directory": dir,
		"supportsRestart": true, "launchMode": "attach", "mode": "debug"})
	out.event("app.debugPort", debugPortParams{AppID: appID, Port: portOf(ws), WSURI: ws})
	out.event("app.started", appIDParams{appID})

	reqs := make(chan []byte)
	go func() { // owned by the process: stdin EOF just ends it
		br := bufio.NewReader(stdin)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case reqs <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-vm.done:
			out.event("app.stop", appIDParams{appID})
			out.flush()
			return 0
		case line := <-reqs:
			line = bytes.TrimSpace(line)
			if !bytes.HasPrefix(line, []byte("[{")) || !bytes.HasSuffix(line, []byte("}]")) {
				continue
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					FullRestart bool `json:"fullRestart"`
				} `json:"params"`
			}
			if json.Unmarshal(line[1:len(line)-1], &req) != nil || len(req.ID) == 0 {
				continue
			}
			switch req.Method {
			case "app.restart":
				res := restartResult{Code: 0}
				var err error
				if req.Params.FullRestart {
					err = vm.call(ctx, "_flutter.runInView", map[string]any{"viewId": "_flutterView/0x1"}, nil)
				} else {
					var rep struct {
						Success bool `json:"success"`
					}
					err = vm.call(ctx, "reloadSources", map[string]any{"isolateId": vmInfo.Isolates[0].ID}, &rep)
					if err == nil && !rep.Success {
						err = fmt.Errorf("reload rejected")
					}
				}
				if err != nil {
					res = restartResult{1, "Hot reload failed: " + err.Error()}
				}
				out.send(map[string]any{"id": req.ID, "result": res})
			case "app.detach", "app.stop":
				if req.Method == "app.stop" {
					_ = vm.call(ctx, "ext.flutter.exit", map[string]any{"isolateId": vmInfo.Isolates[0].ID}, nil)
				}
				out.event("app.stop", appIDParams{appID})
				out.send(map[string]any{"id": req.ID, "result": true})
				out.flush()
				return 0
			default:
				out.send(map[string]any{"id": req.ID, "error": "command not understood: " + req.Method, "trace": daemonTrace})
			}
		}
	}
}

// attachWS is the WebSocket URI of a --debug-uri: its http form plus
// "ws", as the tool derives it.
func attachWS(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		//lint:ignore ST1005 flutter's own text
		return "", fmt.Errorf("Invalid --debug-uri: %q", raw)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "ws":
	default:
		//lint:ignore ST1005 flutter's own text
		return "", fmt.Errorf("Invalid --debug-uri: %q", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.Path += "ws"
	return u.String(), nil
}

// vmCaller is a minimal VM-service client: calls and their answers.
type vmCaller struct {
	c     *websocket.Conn
	mu    sync.Mutex
	n     int
	calls map[string]chan json.RawMessage
	done  chan struct{}
	once  sync.Once
}

func (v *vmCaller) read(ctx context.Context) {
	for {
		_, data, err := v.c.Read(ctx)
		if err != nil {
			v.once.Do(func() { close(v.done) })
			return
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(data, &m) != nil || len(m.ID) == 0 {
			continue
		}
		v.mu.Lock()
		ch := v.calls[string(m.ID)]
		delete(v.calls, string(m.ID))
		v.mu.Unlock()
		if ch != nil {
			ch <- data
		}
	}
}

func (v *vmCaller) call(ctx context.Context, method string, params map[string]any, result any) error {
	v.mu.Lock()
	v.n++
	id := fmt.Sprintf(`"a%d"`, v.n)
	ch := make(chan json.RawMessage, 1)
	v.calls[id] = ch
	v.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err := v.c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	select {
	case data := <-ch:
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-v.done:
		return fmt.Errorf("the VM service went away")
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: no answer", method)
	}
}
