package runs

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/store"
)

func TestMain(m *testing.M) {
	switch os.Getenv("FLY_TEST_HELPER") {
	case "flutter":
		os.Exit(fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	case "tree":
		code := startGrandchild(os.Getenv(envPIDFile))
		if code == 0 && os.Getenv(envTreeStays) != "" {
			time.Sleep(time.Hour) // until the test ends it
		}
		os.Exit(code)
	case "sleep":
		time.Sleep(time.Hour) // until the test ends it
		os.Exit(0)
	}
	// Every process, reader and notifier goroutine of an engine is gone
	// once it is closed.
	goleak.VerifyTestMain(m)
}

// The "tree" helper starts a grandchild of the test, which sleeps, and
// writes its pid to the file envPIDFile names; then it exits, or with
// envTreeStays, sleeps too.
const (
	envPIDFile   = "FLY_TEST_PIDFILE"
	envTreeStays = "FLY_TEST_TREE_STAYS"
)

// startGrandchild starts this binary again as a "sleep" helper, and
// writes its pid to pidFile.
func startGrandchild(pidFile string) int {
	self, err := os.Executable()
	if err != nil {
		return 2
	}
	gc := exec.Command(self)
	gc.Env = append(os.Environ(), "FLY_TEST_HELPER=sleep")
	gc.SysProcAttr = grandchildAttr()
	if err := gc.Start(); err != nil {
		return 2
	}
	if err := os.WriteFile(pidFile+".tmp", []byte(strconv.Itoa(gc.Process.Pid)), 0o600); err != nil {
		return 2
	}
	if err := os.Rename(pidFile+".tmp", pidFile); err != nil {
		return 2
	}
	return 0
}

// newEngine returns an engine with a store and the fake flutter; the
// cleanup closes both.
func newEngine(t *testing.T) *Engine {
	e, _ := newEngineWith(t, Config{StopGrace: time.Second}, store.Options{})
	return e
}

// newEngineWith is newEngine for cfg (its Flutter is the fake) with a
// store opened with opts.
func newEngineWith(t *testing.T, cfg Config, opts store.Options) (*Engine, *store.DB) {
	t.Helper()
	flutter, err := fakeflutter.Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Flutter = flutter
	e := New(cfg, slog.New(slog.DiscardHandler), nil)
	db, err := store.Open(filepath.Join(t.TempDir(), "fly.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(db, filepath.Join(t.TempDir(), "seqmarks")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owned by the cleanup
		defer close(done)
		db.Run(ctx)
	}()
	t.Cleanup(func() {
		e.Close()
		cancel()
		<-done
		db.Close()
	})
	return e, db
}

func fakeEnv(vars ...string) map[string]string {
	env := map[string]string{"FLY_TEST_HELPER": "flutter", "PATH": os.Getenv("PATH")}
	for i := 0; i+1 < len(vars); i += 2 {
		env[vars[i]] = vars[i+1]
	}
	return env
}

// TestStartLimitConcurrent starts twelve runs at once in one workspace
// with a limit of two: exactly two start, the others get a LimitError, and
// the limit is never exceeded, whatever the interleaving.
func TestStartLimitConcurrent(t *testing.T) {
	e := newEngine(t)
	root := t.TempDir()
	const n, max = 12, 2
	var wg sync.WaitGroup
	results := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := e.Start(context.Background(), Spec{Kind: store.KindRun, Root: root, Max: max,
				Env: fakeEnv(fakeflutter.EnvTickMS, "0"), Args: []string{"run", "--machine"}})
			results <- err
		})
	}
	wg.Wait()
	close(results)
	started := 0
	for err := range results {
		var le *LimitError
		switch {
		case err == nil:
			started++
		case errors.As(err, &le):
			if le.Max != max {
				t.Errorf("LimitError.Max = %d, want %d", le.Max, max)
			}
		default:
			t.Errorf("Start = %v", err)
		}
	}
	if started != max {
		t.Errorf("%d runs started with a limit of %d", started, max)
	}
	if live := e.LiveIDs(root, store.KindRun); len(live) != max {
		t.Errorf("%d live runs, want %d", len(live), max)
	}
	// Another workspace, and another kind, have their own limits.
	if _, err := e.Start(context.Background(), Spec{Kind: store.KindRun, Root: t.TempDir(), Max: max,
		Env: fakeEnv(fakeflutter.EnvTickMS, "0"), Args: []string{"run", "--machine"}}); err != nil {
		t.Errorf("a run in another workspace: %v", err)
	}
}

// TestStartRecordIsDurable: once Start returns, the run's record is on
// disk, with its pid: a flyd killed a moment later leaves the next one
// what it needs to mark the run interrupted and kill its process group.
func TestStartRecordIsDurable(t *testing.T) {
	e := newEngine(t)
	r, err := e.Start(context.Background(), Spec{Kind: store.KindBuild, Root: t.TempDir(),
		Env: fakeEnv(fakeflutter.EnvStartupMS, "60000"), Args: []string{"build", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.db.GetRun(r.ID()) // no Flush: it must be there already
	if err != nil || rec.PID == 0 || rec.State != store.StateStarting {
		t.Errorf("record right after Start = %+v, %v, want it stored with its pid", rec, err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
