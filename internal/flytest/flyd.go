package flytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/wire"
)

// Flyd is a running flyd binary, started by StartFlyd.
type Flyd struct {
	Cmd    *exec.Cmd
	Stderr *Buffer // flyd's log, at debug level

	socket string
	runs   string     // the runs' holder directories
	killed bool       // by Kill: it could not clean up
	done   chan error // the Wait result, put back by whoever takes it
}

// StartFlyd runs "flyd run --log-level debug args..." in e and blocks
// until it answers GET /v1/status with its own pid. Cleanup stops it
// with its runs (flyctl daemon stop --runs), unless the test stopped it,
// and shows its log if the test failed. The Flyd owns the goroutine that
// waits for the process; Stop and Kill drain it.
func StartFlyd(t testing.TB, e *Env, args ...string) *Flyd {
	t.Helper()
	flyd, _ := Binaries(t)
	return StartFlydBinary(t, e, flyd, args...)
}

// StartFlydBinary is StartFlyd for the flyd binary at path (another
// build: a test of an upgrade).
func StartFlydBinary(t testing.TB, e *Env, flyd string, args ...string) *Flyd {
	t.Helper()
	p := &Flyd{socket: e.Paths.Socket, runs: e.Paths.Runs(), Stderr: &Buffer{}, done: make(chan error, 1)}
	// A free loopback port unless the test names one: tests run side by
	// side, and a developer's own flyd may hold the default.
	base := []string{"run", "--log-level", "debug"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--listen") }) {
		base = append(base, "--listen", "127.0.0.1:0")
	}
	p.Cmd = exec.Command(flyd, append(base, args...)...)
	if e.MaxFiles > 0 {
		// The shell sets the limit and becomes flyd: the pid is flyd's.
		p.Cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, e.MaxFiles), flyd}, append(base, args...)...)...)
	}
	p.Cmd.Env = e.Vars
	p.Cmd.Stderr = p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.Cmd.Wait() }() // owned by p: drained by Stop or Kill
	t.Cleanup(func() {
		var report string
		if t.Failed() { // what became of the runs the test waited on
			report = runsReport(p.socket, p.runs)
		}
		p.StopRuns(t)
		if t.Failed() { // what flyd did while the test waited
			t.Logf("flyd's log:\n%s\nits runs:\n%s", p.Stderr, report)
		}
	})
	lc := localclient.New(e.Paths.Socket)
	defer lc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.ready(lc)
		if err == nil {
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("flyd exited early: %v\n%s", err, p.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("flyd did not answer within 30s (%v)\n%s", err, p.Stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether this flyd, not another one, answers on the socket.
func (p *Flyd) ready(lc *localclient.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := lc.Status(ctx)
	if err != nil {
		return err
	}
	if st.PID != p.Cmd.Process.Pid {
		return fmt.Errorf("status from pid %d, want %d", st.PID, p.Cmd.Process.Pid)
	}
	return nil
}

// Stop asks flyd to stop (SIGTERM; on Windows through its pipe) and
// waits for a clean exit that removed the socket, unless Kill killed it
// first. The runs their holders keep go on. It may be called more than
// once.
func (p *Flyd) Stop(t testing.TB) {
	_ = askToStop(p.Cmd, p.socket)
	p.waitStopped(t)
}

// StopRuns is Stop with every run: flyctl daemon stop --runs.
func (p *Flyd) StopRuns(t testing.TB) {
	select {
	case err := <-p.done: // gone already
		p.done <- err
	default:
		lc := localclient.New(p.socket)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := lc.StopDaemon(ctx, wire.ShutdownRequest{Runs: true})
		cancel()
		lc.CloseIdleConnections()
		if err != nil {
			_ = askToStop(p.Cmd, p.socket)
		}
	}
	p.waitStopped(t)
}

// waitStopped waits for a clean exit that removed the socket, as Stop.
func (p *Flyd) waitStopped(t testing.TB) {
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil && !p.killed && !strings.Contains(err.Error(), "killed") {
			t.Errorf("flyd exit after SIGTERM: %v\n%s", err, p.Stderr)
		}
		if err == nil && !p.killed && leftBehind(p.socket) {
			t.Errorf("flyd left its socket %s behind after SIGTERM", p.socket)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("flyd did not stop within 30s of being asked; what it was doing:\n%s", p.Dump(t))
	}
}

// leftBehind reports whether a stopped flyd's socket is still there and
// dead. A socket that answers is another flyd's: a shim that lost this
// one starts a new flyd at once, which may already listen on the same
// path, or be between removing the old file and listening (so a refusal
// is looked at again for a while before it counts).
func leftBehind(socket string) bool {
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := os.Lstat(socket); err != nil {
			return false
		}
		if c, err := net.DialTimeout("unix", socket, time.Second); err == nil {
			c.Close()
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills flyd with SIGKILL, as a crash would, and waits for it.
func (p *Flyd) Kill(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.done <- <-p.done
	p.killed = true
}

// Dump ends flyd with SIGQUIT, on which the Go runtime prints every
// goroutine's stack, and returns what flyd printed from then on: what a
// flyd that a test found stuck was doing. Stop does not count the exit
// as a failure to stop.
func (p *Flyd) Dump(t testing.TB) string {
	t.Helper()
	before := len(p.Stderr.String())
	if err := p.Cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Sprintf("no goroutine dump: %v", err)
	}
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		p.done <- <-p.done
	}
	p.killed = true
	return p.Stderr.String()[before:]
}
