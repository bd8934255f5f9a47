package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chromiumPath is Debian's Chromium: CI installs it; elsewhere the
// browser test skips without it.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("FLY_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed: CI must run the dashboard's browser test (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed (apt-get install chromium): skipping the dashboard's browser test")
	return ""
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDashboardInBrowser drives the dashboard in headless Chromium: a run
// started through the shim appears, its new log lines appear live, Stop
// stops it (checked by pid), the API refuses a request without the
// cookie, and the page reconnects by itself after flyd restarts. A page
// opened then lists the ended run by its app's name, with its log (the
// machine events hidden until the toggle shows them) and its errors; and
// no request of the page's own fails, its icon's included.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	chromium := chromiumPath(t)
	dir := conformanceDir(t)
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvErrorsAtStart+"=overflow,overflow")
	addr := freePort(t)
	fl := flytest.StartFlyd(t, e, "--listen", addr)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	cs := viaShim(e)(t, "agent", root, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "flutter_run", Arguments: map[string]any{"device": "linux"}})
	if err != nil || res.IsError {
		t.Fatalf("flutter_run: %v %v", err, res)
	}
	var run mcpserver.RunResult
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &run)
	// A run that crashes, in a workspace of its own: three seconds after
	// it started, so that flutter_run has answered (see TestFirstDayCrash).
	crashRoot := flutterProject(t)
	crashCS := viaShimWith(e, fakeflutter.EnvTickMS+"=100", fakeflutter.EnvCrashAfter+"=30")(t, "agent", crashRoot, nil)
	var crash mcpserver.RunResult
	if res := callTool(t, crashCS, "flutter_run", map[string]any{"device": "linux"}, &crash); res.IsError {
		t.Fatalf("flutter_run of the run that crashes: %s", toolText(res))
	}
	ideRun(t, e, root) // an app an IDE runs in the same workspace
	var st *wire.Status
	flytest.Eventually(t, "the IDE's app in the status", func() bool {
		var err error
		st, err = getStatus(e)
		return err == nil && len(st.Apps) == 1
	})
	st.Runs = slices.DeleteFunc(st.Runs, func(r wire.Run) bool { return r.RunID == crash.RunID }) // live or not by now
	if len(st.Runs) != 1 {
		t.Fatalf("status: %+v", st)
	}
	var crashed wire.Run
	flytest.Eventually(t, "the other run to crash", func() bool {
		var list mcpserver.RunsListResult
		callTool(t, crashCS, "runs_list", nil, &list)
		r, ok := findRun(list.Runs, crash.RunID)
		crashed = r
		return ok && !r.Live()
	})
	// The shims go before the browser script has flyd restarted: a shim
	// that lost its flyd starts one of its own at once, which could take
	// the state dir before the test's flyd on the dashboard's address.
	cs.Close()
	crashCS.Close()
	pid := st.Runs[0].PID
	tok, err := os.ReadFile(e.Paths.Token())
	if err != nil {
		t.Fatal(err)
	}

	// Another local web server the user's browser visits: it records
	// everything the browser sends it.
	var otherMu sync.Mutex
	var otherSaw []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		r.Header.Write(&b)
		otherMu.Lock()
		otherSaw = append(otherSaw, r.Method+" "+r.URL.String()+"\n"+b.String())
		otherMu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>other</title>")
	}))
	defer other.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), filepath.Join(dir, "dashboard.mjs"))
	cmd.Env = append(os.Environ(), "FLY_URL=http://"+addr+"/#token="+strings.TrimSpace(string(tok)), "FLY_RUN="+run.RunID, "FLY_CRASHED="+crash.RunID, "CHROMIUM="+chromium, "FLY_APP="+st.Apps[0].ID,
		"FLY_OTHER="+other.URL+"/")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr flytest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var step map[string]any
		if err := json.Unmarshal(sc.Bytes(), &step); err != nil {
			t.Logf("browser: %s", sc.Text())
			continue
		}
		name, _ := step["step"].(string)
		steps[name] = step
		t.Logf("browser step %s", sc.Text())
		switch name {
		case "stopped":
			if flytest.Exists(pid) {
				t.Errorf("the page says stopped, but the run's process %d is alive", pid)
			}
		case "restart-flyd":
			fl.Stop(t)
			fl = flytest.StartFlyd(t, e, "--listen", addr)
			fmt.Fprintln(stdin, "restarted")
		}
	}
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the browser script failed: %v\n%s", err, stderr.String())
	}
	if s := steps["login"]; s == nil || s["url_has_token"] != false || s["title"] != "fly" || s["cookies"] != float64(0) {
		t.Fatalf("login step = %v: the address must lose the token, and no cookie may be set", s)
	}
	if s := steps["app-listed"]; s == nil || !strings.Contains(s["text"].(string), "VS Code") {
		t.Fatalf("the IDE's app in the dashboard = %v", s)
	}
	if s := steps["errors-panel"]; s == nil || s["text"] != "2× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12" || s["count"] != "1" {
		t.Fatalf("the errors panel = %v, want the overflow counted twice and one error in the run's row", s)
	}
	if s := steps["no-cookie"]; s == nil || s["status"] != float64(401) {
		t.Fatalf("a credentialed request without the Authorization header = %v, want 401", s)
	}
	if s := steps["other-port"]; s == nil || s["stored"] != `[null,0,""]` {
		t.Fatalf("the other port's page reads %v of the dashboard's storage", s)
	} else if f, _ := s["fetched"].(map[string]any); f["sent"] != false || f["violated"] != "connect-src" {
		t.Fatalf("the dashboard's fetch to another port = %v, want it refused by the page's connect-src", f)
	}
	if s := steps["reloaded"]; s == nil || s["url_has_token"] != false {
		t.Fatalf("after a reload: %v", s)
	}
	otherMu.Lock()
	saw := strings.Join(otherSaw, "\n")
	otherMu.Unlock()
	// The navigation, and the browser's own favicon request if it came
	// by now; never the refused fetch.
	if !strings.HasPrefix(saw, "GET /visited\n") || strings.Contains(saw, "GET /fetched") {
		t.Fatalf("the other port saw, want the navigation and not the dashboard's fetch:\n%s", saw)
	}
	if key := strings.TrimSpace(string(tok)); strings.Contains(saw, key) || strings.Contains(strings.ToLower(saw), "cookie:") {
		t.Fatalf("the other port received a credential:\n%s", saw)
	}
	for _, want := range []string{"run-listed", "log-live", "errors-panel", "stopped", "reconnected", "finished-listed", "finished-log", "clean-live", "clean-finished"} {
		if steps[want] == nil {
			t.Fatalf("the browser never reached %s (steps %v)\n%s", want, steps, stderr.String())
		}
	}
	if errs, _ := steps["reconnected"]["errors"].([]any); len(errs) > 0 {
		t.Fatalf("page errors: %v", errs)
	}
	if s := steps["finished-listed"]; s["app"] != "demo" || s["device"] != "linux" || s["by"] != "agent" || s["no_runs_hidden"] != true {
		t.Errorf("the ended run after a restart = %v, want it listed as the app demo on linux, started by agent", s)
	}
	s := steps["finished-log"]
	if lines, _ := s["lines"].(float64); lines < 5 || !strings.HasPrefix(s["state"].(string), "ended: stopped") || !strings.Contains(s["stdout"].(string), "Launching lib/main.dart on Linux") {
		t.Errorf("the ended run's log = %v, want the app's lines from the store and how it ended", s)
	}
	if events, _ := s["events"].(float64); events == 0 || s["visible_before"] != float64(0) || s["visible_after"] != events {
		t.Errorf("machine events = %v: want some, all hidden by default and all shown by the toggle", s)
	}
	if want := "2× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12"; s["error"] != want {
		t.Errorf("the ended run's errors panel = %q, want %q (from its log)", s["error"], want)
	}
	if !crashed.Crashed || crashed.State != wire.RunFailed {
		t.Errorf("the run that crashed is %s (crashed %v), want failed, crashed", crashed.State, crashed.Crashed)
	}
	if s := steps["crashed-log"]; s == nil || s["state"] != "crashed" || !strings.HasPrefix(fmt.Sprint(s["log_state"]), "ended: crashed") ||
		s["lost"] != true {
		t.Errorf("the crashed run in the dashboard = %v, want it listed as crashed, its log read to the crash", s)
	}
	if s := steps["clean-finished"]; s["visible_again"] != float64(0) {
		t.Errorf("the toggle unchecked again shows %v events, want none", s["visible_again"])
	}
	if s := steps["clean-live"]; fmt.Sprint(s["favicon"]) != "[200 image/svg+xml]" {
		t.Errorf("GET /favicon.ico without the token = %v, want 200 and an SVG", s["favicon"])
	}
	for _, step := range []string{"clean-live", "clean-finished"} {
		if p, _ := steps[step]["problems"].([]any); len(p) > 0 {
			t.Errorf("the page's requests or console at %s: %v, want no failure and no error", step, p)
		}
	}
	if errs, _ := steps["clean-finished"]["errors"].([]any); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
