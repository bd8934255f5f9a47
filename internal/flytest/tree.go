package flytest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
)

// WriteTree creates files (slash path → content) under root.
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Status is GET /v1/status of e's flyd, over its socket.
func Status(e *Env) (*wire.Status, error) {
	lc := localclient.New(e.Paths.Socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return lc.Status(ctx)
}

// Eventually waits until cond holds; the minute is a hang detector, not
// a speed check. It polls: what tests wait on here (a process's pid
// file, a process gone, a state flyd reports) sends no event to wait on,
// so the 20 ms sleep is the interval of looking at the condition, not
// the condition.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitLine waits until ring holds a line containing text.
func WaitLine(t testing.TB, ring *logring.Ring, text string) {
	t.Helper()
	Eventually(t, "a log line with "+text, func() bool {
		for _, e := range ring.Tail(ring.Len()) {
			if strings.Contains(e.Text, text) {
				return true
			}
		}
		return false
	})
}
