package fakeflutter

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// This file holds what goes out on stdout: lines, the machine protocol's events, ids and URIs.

// A trace shaped like the Dart stack flutter_tools sends with an error.
const daemonTrace = `#0      AppDomain.restart (package:flutter_tools/src/commands/daemon.dart:623:7)
#1      Domain.handleCommand.<anonymous closure> (package:flutter_tools/src/commands/daemon.dart:269:16)
#2      new Future.sync (dart:async/future.dart:311:31)
#3      Domain.handleCommand (package:flutter_tools/src/commands/daemon.dart:266:12)
#4      Daemon._handleRequest (package:flutter_tools/src/commands/daemon.dart:240:34)
`

// launchTrace is shaped like the Dart stack of the ToolExit that app.stop
// carries when a run fails to build: flutter_tools' frames, none of the
// app's.
const launchTrace = `#0      throwToolExit (package:flutter_tools/src/base/common.dart:10:3)
#1      buildLinux (package:flutter_tools/src/linux/build_linux.dart:160:5)
<asynchronous suspension>
#2      LinuxDevice.buildForDevice (package:flutter_tools/src/linux/linux_device.dart:67:5)
<asynchronous suspension>
#3      DesktopDevice.startApp (package:flutter_tools/src/desktop_device.dart:121:7)
<asynchronous suspension>
#4      FlutterDevice.runHot (package:flutter_tools/src/resident_runner.dart:585:54)
<asynchronous suspension>
#5      HotRunner.run (package:flutter_tools/src/run_hot.dart:376:39)
<asynchronous suspension>
#6      AppDomain.launch.<anonymous closure> (package:flutter_tools/src/commands/daemon.dart:735:22)
<asynchronous suspension>
`

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
