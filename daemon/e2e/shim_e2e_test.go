package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/store"
)

// restartedMessage is what the shim answers a request in flight when
// flyd goes away (see package shim).
const restartedMessage = "flyd restarted; the request was not replayed, send it again"

// viaShimNoStart is viaShim with a shim that cannot start a flyd of its
// own (its --flyd exits at once), so that the flyd the test starts after
// a kill is the one that answers, however slow the machine.
func viaShimNoStart(e *flytest.Env) connector {
	return func(t testing.TB, name, workspace string, n *notes) *mcp.ClientSession {
		t.Helper()
		_, flyctl := flytest.Binaries(t)
		falseBin, err := exec.LookPath("false")
		if err != nil {
			// Windows has no false: flyctl has no run command, so
			// "flyctl run …" exits at once with a usage error.
			falseBin = flyctl
		}
		cmd := exec.Command(flyctl, "mcp", "--workspace", workspace, "--flyd", falseBin)
		cmd.Env = e.Vars
		cmd.Stderr = os.Stderr
		return connectClient(t, name, &mcp.CommandTransport{Command: cmd}, n)
	}
}

// TestShimSurvivesRestart: a client subscribed through the shim keeps
// its session across two flyd restarts, without re-initializing: its
// next calls succeed, its subscriptions keep delivering updates, the
// call in flight at a kill fails with the restart error and is not
// replayed.
func TestShimSurvivesRestart(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=20")
	first := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	n := newNotes()
	cs := viaShimNoStart(e)(t, "survivor", root, n)
	ctx := context.Background()

	var started mcpserver.RunResult
	if res := callTool(t, cs, "flutter_run", nil, &started); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	const mainURI = "workspace:///lib/main.dart"
	for _, uri := range []string{started.LogURI, mainURI} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	n.waitUpdated(t, started.LogURI)
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() { print(0); }\n"})
	n.waitUpdated(t, mainURI)

	// Restart 1: kill -9, then a flyd whose builds take a minute. The run
	// outlives it, under its holder.
	first.Kill(t)
	slow := *e
	slow.Vars = append(slices.Clone(e.Vars), fakeflutter.EnvStartupMS+"=60000")
	second := flytest.StartFlyd(t, &slow)

	var listed mcpserver.RunsListResult
	callTool(t, cs, "runs_list", nil, &listed)
	if ri, ok := findRun(listed.Runs, started.RunID); !ok || ri.State != "running" || ri.Holder != "holder" {
		t.Fatalf("runs_list after the restart = %+v, want run %s running, taken back from its holder", listed.Runs, started.RunID)
	}
	if uris, _ := listAll(t, cs); !slices.Contains(uris, mainURI) {
		t.Fatalf("resources/list after the restart lacks %s: %v", mainURI, uris)
	}
	// The new flyd knows the session by the replayed initialize.
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].ClientName != "survivor" {
		t.Errorf("sessions after the restart = %+v, want one, of client survivor", st.Sessions)
	}
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() { print(1); }\n"})
	n.waitUpdated(t, mainURI)

	// Restart 2, with a build in flight.
	done := make(chan error, 1)
	go func() { // owned by the test: received from below
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "flutter_build", Arguments: map[string]any{"platform": "web"}})
		done <- err
	}()
	waitBuilding(t, cs)
	second.Kill(t)
	select {
	case err := <-done:
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != -32603 || !strings.HasPrefix(we.Message, restartedMessage) {
			t.Fatalf("build in flight at the kill returned %v, want a -32603 %q error", err, restartedMessage)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the build in flight at the kill got no reply within 30s")
	}
	flytest.StartFlyd(t, e)

	callTool(t, cs, "runs_list", nil, &listed)
	var builds []wire.Run
	for _, ri := range listed.Runs {
		if ri.Kind == string(store.KindBuild) {
			builds = append(builds, ri)
		}
	}
	if len(builds) != 1 || builds[0].State != "interrupted" {
		t.Errorf("builds after the second restart = %+v, want one, interrupted (never replayed)", builds)
	}
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() { print(2); }\n"})
	n.waitUpdated(t, mainURI)
	if text, _ := readText(t, cs, mainURI); !strings.Contains(text, "print(2)") {
		t.Errorf("read after two restarts = %q", text)
	}
}

// waitBuilding waits until a build shows up as starting in runs_list
// with its start recorded: runs_list shows a build as soon as its process
// runs, and its record goes to disk just after (Run.begin), before the
// start action is logged. A kill -9 in between loses a build that had
// only just started.
func waitBuilding(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var listed mcpserver.RunsListResult
		callTool(t, cs, "runs_list", nil, &listed)
		for _, ri := range listed.Runs {
			if ri.Kind == string(store.KindBuild) && ri.State == "starting" && ri.LastAction != nil && ri.LastAction.What == "start" {
				return
			}
		}
	}
	t.Fatal("the build never showed up as started in runs_list")
}

// shimProc is a "flyctl mcp" process driven with raw JSON-RPC lines.
type shimProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	out    *bufio.Reader
	stderr *flytest.Buffer
}

func newShimProc(t *testing.T, e *flytest.Env, workspace string, args ...string) *shimProc {
	t.Helper()
	_, flyctl := flytest.Binaries(t)
	p := &shimProc{cmd: exec.Command(flyctl, append([]string{"mcp", "--workspace", workspace}, args...)...), stderr: &flytest.Buffer{}}
	p.cmd.Env = e.Vars
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = w
	p.stdout, p.out = r, bufio.NewReader(r)
	t.Cleanup(func() {
		p.stdin.Close()
		if p.cmd.Process != nil {
			done := make(chan struct{})
			go func() { p.cmd.Wait(); close(done) }() // owned by this cleanup
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				p.cmd.Process.Kill()
				<-done
				t.Errorf("flyctl mcp still running 20s after its stdin closed\n%s", p.stderr)
			}
		}
		w.Close()
		r.Close()
	})
	return p
}

// request writes one line and reads the reply.
func (p *shimProc) request(t *testing.T, line string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
	p.stdout.SetReadDeadline(time.Now().Add(60 * time.Second))
	b, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read the shim's stdout: %v\n%s", err, p.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("shim wrote %q: %v", b, err)
	}
	return m
}

// flydPIDs lists the flyd processes running for e: its binary with
// "run", and e's state dir in their environment.
func flydPIDs(t *testing.T, e *flytest.Env) []int {
	t.Helper()
	flyd, _ := flytest.Binaries(t)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !alive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || args[0] != flyd || args[1] != "run" {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(environ), "\x00"), "FLY_STATE_DIR="+e.Paths.StateDir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestShimsStartOneFlyd: two shims started at the same instant with no
// daemon running both connect, and exactly one flyd was started.
func TestShimsStartOneFlyd(t *testing.T) {
	e := flytest.NewEnv(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() {}\n"})
	// Starting flyd is logged at info, which the shim hides by default.
	a, b := newShimProc(t, e, root, "--log-level", "info"), newShimProc(t, e, root, "--log-level", "info")
	for _, p := range []*shimProc{a, b} {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	for i, p := range []*shimProc{a, b} {
		if m := p.request(t, init); m["result"] == nil {
			t.Fatalf("shim %d: reply to initialize = %v, want a result\n%s", i, m, p.stderr)
		}
	}
	st, err := getStatus(e)
	if err != nil {
		t.Fatalf("no daemon after both shims connected: %v", err)
	}
	t.Cleanup(func() { stopPID(t, e, st.PID) })

	starts := strings.Count(a.stderr.String(), `msg="started flyd"`) + strings.Count(b.stderr.String(), `msg="started flyd"`)
	if starts != 1 {
		t.Errorf("the shims started flyd %d times, want once\nshim a:\n%s\nshim b:\n%s", starts, a.stderr, b.stderr)
	}
	if pids := flydPIDs(t, e); len(pids) != 1 || pids[0] != st.PID {
		t.Errorf("flyd processes for this environment: %v, want only %d", pids, st.PID)
	}
	for i, p := range []*shimProc{a, b} {
		if _, err := io.WriteString(p.stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		m := p.request(t, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"workspace:///lib/main.dart"}}`)
		if m["result"] == nil {
			t.Errorf("shim %d: read = %v, want a result", i, m)
		}
	}
	if st, err := getStatus(e); err != nil || len(st.Sessions) != 2 {
		t.Errorf("status = %+v, %v; want two sessions on the one flyd", st, err)
	}
}
