package fakeflutter

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// dtdServer is the Dart Tooling Daemon a debug run starts (EnvDTD): it
// lists the app's VM service under ConnectedApp (the reference's §4.4)
// and writes its file into $DART_DATA_HOME/dtd (§4.1), which it removes
// when it closes, as a graceful DTD does.
type dtdServer struct {
	ln    net.Listener
	srv   *http.Server
	token string
	file  string // "" when none was written

	mu    sync.Mutex
	conns map[*websocket.Conn]bool
	apps  []map[string]any // {uri, exposedUri, name}
}

func startDTD(root, vmURI, name string) (*dtdServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dtd: %w", err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	d := &dtdServer{ln: ln, token: base64.URLEncoding.EncodeToString(b), conns: map[*websocket.Conn]bool{},
		apps: []map[string]any{{"uri": vmURI, "exposedUri": nil, "name": name}}}
	d.srv = &http.Server{Handler: http.HandlerFunc(d.serve), ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(ln) // owned by d: close shuts it down
	if home := os.Getenv("DART_DATA_HOME"); home != "" {
		dir := filepath.Join(home, "dtd")
		info, _ := json.Marshal(map[string]any{"wsUri": d.uri(), "epoch": time.Now().UnixMilli(), "pid": os.Getpid(),
			"dartVersion": DartVersion + " (stable) on \"linux_x64\"", "workspaceRoot": root, "ideName": os.Getenv("DASH__IDE_NAME")})
		if err := os.MkdirAll(dir, 0o700); err == nil {
			d.file = filepath.Join(dir, strconv.Itoa(os.Getpid()))
			if err := os.WriteFile(d.file, info, 0o600); err != nil {
				d.file = ""
			}
		}
	}
	return d, nil
}

// uri is the DTD's WebSocket URI, as app.dtd and its file give it.
func (d *dtdServer) uri() string { return "ws://" + d.ln.Addr().String() + "/" + d.token }

func (d *dtdServer) close() {
	if d.file != "" {
		os.Remove(d.file)
	}
	d.mu.Lock()
	for c := range d.conns {
		c.CloseNow()
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

func (d *dtdServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/"+d.token && r.URL.Path != "/"+d.token+"/" {
		http.Error(w, "forbidden", http.StatusForbidden) // the auth code is mandatory
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	d.mu.Lock()
	d.conns[c] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		c.CloseNow()
	}()
	write := func(b []byte) { _ = c.Write(r.Context(), websocket.MessageText, b) } // a DTD that posts nothing writes from here only
	serveRPC(r.Context(), c, write, d.call, nil)
}

// call answers one request: ConnectedApp and its stream.
func (d *dtdServer) call(method string, _ json.RawMessage) (any, *rpcError) {
	switch method {
	case "streamListen", "streamCancel":
		return map[string]any{"type": "Success"}, nil
	case "ConnectedApp.getVmServices":
		d.mu.Lock()
		defer d.mu.Unlock()
		return map[string]any{"type": "VmServicesResponse", "vmServices": d.apps}, nil
	}
	return nil, &rpcError{Code: -32601, Message: "Method not found"}
}
