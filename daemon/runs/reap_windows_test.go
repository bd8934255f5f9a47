package runs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/fly-dev/fly/store"
)

// startTree starts the test binary as a "tree" helper run; it returns
// the run and a handle to the grandchild the helper started.
func startTree(t *testing.T, e *Engine, stays bool) (*Run, windows.Handle) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	env := fakeEnv("FLY_TEST_HELPER", "tree", envPIDFile, pidFile)
	if stays {
		env[envTreeStays] = "1"
	}
	r, err := e.Start(context.Background(), Spec{Kind: store.KindTool, Root: dir, Env: env, Command: self})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, pidFile)
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatalf("open the grandchild, %d: %v", pid, err)
	}
	t.Cleanup(func() { windows.CloseHandle(h) })
	return r, h
}

// ended waits for a process to end, a minute at most (a hang detector).
func ended(h windows.Handle) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(time.Minute/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}

// TestStopEndsTheTree: stopping a run ends what its process started (it
// is in the run's job object), not only the process.
func TestStopEndsTheTree(t *testing.T) {
	e := newEngine(t)
	r, gc := startTree(t, e, true)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !ended(gc) {
		t.Fatalf("the grandchild of run %s outlived its stop by a minute", r.ID())
	}
}

// TestEndedRunLeavesNothing: a run whose process exits on its own takes
// what it started with it: the engine releases its job, which ends what
// is left in it.
func TestEndedRunLeavesNothing(t *testing.T) {
	e := newEngine(t)
	r, gc := startTree(t, e, false)
	select {
	case <-r.Done():
	case <-time.After(time.Minute): // a hang detector
		t.Fatalf("run %s did not end", r.ID())
	}
	if !ended(gc) {
		t.Fatalf("the grandchild of run %s outlived its end by a minute", r.ID())
	}
}
