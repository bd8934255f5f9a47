package shim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/paths"
)

// This file holds the harness the relay tests drive: a Relay on real pipes.

// hangAfter is how long a test waits for something that must happen: a
// hang detector, far beyond what a loaded machine needs, never a speed
// check.
const hangAfter = 2 * time.Minute

// harness runs a Relay on real pipes, as flyctl mcp runs it on the
// editor's stdio.
type harness struct {
	t      *testing.T
	relay  *Relay
	stdin  *os.File // write end of the relay's stdin
	stdout *os.File // read end of the relay's stdout
	out    *bufio.Reader
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
	logs   *syncBuffer // the relay's log, when the test did not set one
}

// newHarness returns a harness whose relay is configured but not running;
// tests may adjust h.relay before calling start.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	inR, inW, err := stdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stdin, cfg.Stdout = inR, outW
	if cfg.Socket != "" {
		cfg.Socket = endpointOf(t, cfg.Socket)
	}
	logs := &syncBuffer{}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.MultiWriter(tWriter{t}, logs), nil))
	}
	h := &harness{
		t: t, relay: New(cfg), stdin: inW, stdout: outR,
		out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1), logs: logs,
	}
	t.Cleanup(func() {
		if h.cancel != nil {
			h.cancel()
			inW.Close()
			outR.Close() // a relay blocked writing stdout gets EPIPE and ends
			h.wait()
		}
		inR.Close()
		outR.Close()
		outW.Close()
	})
	return h
}

func (h *harness) start() *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	outW := h.relay.cfg.Stdout.(*os.File)
	go func() {
		err := h.relay.Run(ctx)
		outW.Close() // the test then reads EOF after the last line
		h.done <- err
	}()
	return h
}

// startRelay starts a relay for cfg.
func startRelay(t *testing.T, cfg Config) *harness {
	t.Helper()
	return newHarness(t, cfg).start()
}

// send writes one line (a newline is added) to the relay's stdin.
func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := h.stdin.WriteString(line + "\n"); err != nil {
		h.t.Fatalf("write stdin: %v", err)
	}
}

// waitLog waits until the relay has logged a message containing msg.
func (h *harness) waitLog(msg string) {
	h.t.Helper()
	for deadline := time.Now().Add(hangAfter); !strings.Contains(h.logs.String(), msg); {
		if time.Now().After(deadline) {
			h.t.Fatalf("the relay never logged %q", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeStdin ends the relay's input, as an editor that exits does.
func (h *harness) closeStdin() { h.stdin.Close() }

// readLine reads the next line of the relay's stdout, without its "\n".
func (h *harness) readLine() []byte {
	h.t.Helper()
	h.stdout.SetReadDeadline(time.Now().Add(hangAfter))
	b, err := h.out.ReadBytes('\n')
	if err != nil {
		h.t.Fatalf("read stdout: %v (got %q)", err, b)
	}
	return b[:len(b)-1]
}

// readReply reads the next line and decodes it as a JSON-RPC response.
func (h *harness) readReply() rpcReply {
	h.t.Helper()
	b := h.readLine()
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		h.t.Fatalf("stdout line %q: %v", b, err)
	}
	r.raw = string(b)
	return r
}

type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// wait waits for Run to return and returns its error.
func (h *harness) wait() error {
	h.t.Helper()
	if h.ended {
		return h.err
	}
	select {
	case h.err = <-h.done:
		h.ended = true
	case <-time.After(hangAfter):
		h.t.Fatal("Run did not return")
	}
	return h.err
}

// expectEOF checks that the relay wrote nothing more to stdout.
func (h *harness) expectEOF() {
	h.t.Helper()
	h.stdout.SetReadDeadline(time.Now().Add(hangAfter))
	if b, err := h.out.ReadBytes('\n'); err != io.EOF || len(b) > 0 {
		h.t.Errorf("stdout after the last reply: %q, %v; want EOF", b, err)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// checkGoroutines fails the test if a goroutine of the relay outlives
// Run. The reaper of a started flyd is the documented exception.
func checkGoroutines(t *testing.T) {
	t.Helper()
	ours := regexp.MustCompile(`/shim/[a-z_]+\.go:\d+`)
	var leaked []string
	for deadline := time.Now().Add(3 * time.Second); ; {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "startFlyd.func") {
				continue
			}
			for _, m := range ours.FindAllString(g, -1) {
				if !strings.Contains(m, "_test.go:") {
					leaked = append(leaked, g)
					break
				}
			}
			if strings.Contains(g, "net/http.(*persistConn)") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left after Run:\n%s", strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// endpointOf is the endpoint that a FLY_SOCKET of path names, as flyd and
// the helper processes resolve it: path itself on Unix, the named pipe it
// stands for on Windows.
func endpointOf(t testing.TB, path string) string {
	t.Helper()
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: path, paths.EnvStateDir: filepath.Dir(path)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.Socket
}
