package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sharedScenario: two clients on one workspace share one index; a change
// reaches only the subscribed session; a new file tells everyone the list
// changed. It runs in-process and through the real shim and daemon, with
// clients of either era (newNotes or modernNotes).
func sharedScenario(t *testing.T, connect connector, status func() *wire.Status, era func() *notes) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"pubspec.yaml":           "name: demo\n",
		"lib/main.dart":          "void main() {}\n",
		"lib/other.dart":         "// other\n",
		"build/out.dart":         "skipped\n",
		"android/key.properties": "storePassword=x\n",
	})
	na, nb := era(), era()
	a := connect(t, "client-a", root, na)
	b := connect(t, "client-b", root, nb)

	la, _ := listAll(t, a)
	lb, _ := listAll(t, b)
	if !slices.Equal(la, lb) {
		t.Fatalf("two sessions on one workspace list differently:\nA %v\nB %v", la, lb)
	}
	want := []string{"fly://project/overview", "fly://project/modules", "fly://sessions/current", "fly://sessions/recent", "workspace:///lib/main.dart", "workspace:///lib/other.dart", "workspace:///pubspec.yaml"}
	if !slices.Equal(la, want) {
		t.Fatalf("resources/list = %v, want %v", la, want)
	}
	if status != nil {
		st := status()
		if len(st.Workspaces) != 1 || st.Workspaces[0].Sessions != 2 {
			t.Fatalf("status workspaces = %+v, want one workspace with 2 sessions", st.Workspaces)
		}
		names := []string{st.Sessions[0].ClientName, st.Sessions[1].ClientName}
		slices.Sort(names)
		if !slices.Equal(names, []string{"client-a", "client-b"}) {
			t.Errorf("status session clients = %v", names)
		}
	}

	na.subscribe(t, a, "workspace:///lib/main.dart")
	nb.subscribe(t, b, "workspace:///lib/other.dart")
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() { print(1); }\n"})
	na.waitUpdated(t, "workspace:///lib/main.dart")
	writeTree(t, root, map[string]string{"lib/other.dart": "// changed\n"})
	// B's notifications arrive in order on one connection: had B been told
	// of main.dart, it would show up before other.dart.
	if others := nb.waitUpdated(t, "workspace:///lib/other.dart"); slices.Contains(others, "workspace:///lib/main.dart") {
		t.Fatalf("session B was told of lib/main.dart, which it never subscribed to")
	}
	if text, _ := readText(t, b, "workspace:///lib/main.dart"); !strings.Contains(text, "print(1)") {
		t.Fatalf("B reads stale lib/main.dart: %q", text)
	}

	writeTree(t, root, map[string]string{"lib/new_page.dart": "class NewPage {}\n"})
	na.waitListChanged(t)
	nb.waitListChanged(t)
	lb, _ = listAll(t, b)
	if !slices.Contains(lb, "workspace:///lib/new_page.dart") {
		t.Fatalf("new file missing from list after list_changed: %v", lb)
	}
	if n := na.unstamped.Load() + nb.unstamped.Load(); n > 0 {
		t.Fatalf("%d notifications to 2026-07-28 clients lack the id of their listen stream", n)
	}
}

// eras are the two kinds of client every end-to-end scenario runs with.
var eras = map[string]func() *notes{"2025-11-25": newNotes, "2026-07-28": modernNotes}

func TestSharedWorkspaceInProcess(t *testing.T) {
	for name, era := range eras {
		t.Run(name, func(t *testing.T) {
			sharedScenario(t, inProcess(newTestServer(t)), nil, era)
		})
	}
}

func TestSharedWorkspaceThroughShim(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	for name, era := range eras {
		t.Run(name, func(t *testing.T) {
			e := flytest.NewEnv(t)
			flytest.StartFlyd(t, e)
			sharedScenario(t, viaShim(e), func() *wire.Status {
				st, err := getStatus(e)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}, era)
		})
	}
}

// TestPagingLargeWorkspace pages through thousands of files: every served
// file exactly once, nothing skipped, secret or outside.
func TestPagingLargeWorkspace(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e, "--page-size", "100")
	root := t.TempDir()
	files := map[string]string{"pubspec.yaml": "name: big\n"}
	want := map[string]bool{"workspace:///pubspec.yaml": true}
	for i := range 3000 {
		p := fmt.Sprintf("lib/feature_%02d/widget_%04d.dart", i%40, i)
		files[p] = "// x\n"
		want["workspace:///"+p] = true
	}
	for i := range 200 {
		files[fmt.Sprintf("build/gen_%d.dart", i)] = "x"
		files[fmt.Sprintf(".dart_tool/x_%d.dart", i)] = "x"
		files[fmt.Sprintf("lib/assets/img_%d.png", i)] = "x"
		files[fmt.Sprintf("ios/Pods/p_%d.h", i)] = "x"
	}
	files["android/key.properties"] = "x"
	files[".env"] = "x"
	files["android/app/upload.jks"] = "x"
	writeTree(t, root, files)

	cs := viaShim(e)(t, "pager", root, nil)
	uris, pages := listAll(t, cs)
	seen := map[string]bool{}
	for _, u := range uris {
		if !strings.HasPrefix(u, "workspace:") {
			continue
		}
		if seen[u] {
			t.Errorf("%s listed twice", u)
		}
		seen[u] = true
		if !want[u] {
			t.Errorf("%s listed but should not be served", u)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d workspace files, want %d", len(seen), len(want))
	}
	if pages < 30 {
		t.Errorf("got %d pages for %d resources with page size 100", pages, len(uris))
	}
	if !slices.IsSorted(uris[3:]) {
		t.Error("workspace files are not sorted")
	}
}

// TestEscapesRefused tries to read outside the workspace in every way we
// know of. Each attempt must fail with a clear error and nothing from
// outside may ever come back.
func TestEscapesRefused(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	parent := t.TempDir()
	root := filepath.Join(parent, "app")
	sibling := filepath.Join(parent, "app-secrets") // shares the root's name as a prefix
	const marker = "OUTSIDE-MARKER"
	writeTree(t, parent, map[string]string{
		"app/pubspec.yaml":            "name: app\n",
		"app/lib/main.dart":           "void main() {}\n",
		"app/android/key.properties":  "storePassword=" + marker,
		"app/.env":                    "TOKEN=" + marker,
		"app/.env.production":         "TOKEN=" + marker,
		"app/android/app/release.jks": marker,
		"app/certs/server.pem":        marker,
		"app/build/app.dart":          marker,
		"app/lib/logo.png":            marker,
		"app-secrets/notes.dart":      marker,
		"outside.dart":                marker,
	})
	mustSymlink(t, filepath.Join(parent, "outside.dart"), filepath.Join(root, "lib", "link_out.dart"))
	mustSymlink(t, sibling, filepath.Join(root, "lib", "dir_out"))
	mustSymlink(t, "/etc/passwd", filepath.Join(root, "passwd.txt"))

	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "attacker", root, nil)
	attempts := []struct {
		uri  string
		code int64
	}{
		{"workspace:///../outside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/../../outside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///%2e%2e/outside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///%2E%2E%2Foutside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib%2f..%2f..%2foutside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:////etc/passwd", jsonrpc.CodeInvalidParams},
		{"workspace:///" + filepath.Join(parent, "outside.dart"), jsonrpc.CodeInvalidParams},
		{"workspace://host/lib/main.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/main.dart%00.png", jsonrpc.CodeInvalidParams},
		{"workspace:///..\\outside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib\\..\\..\\outside.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///../app-secrets/notes.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/link_out.dart", -32002},
		{"workspace:///lib/dir_out/notes.dart", -32002},
		{"workspace:///passwd.txt", -32002},
		{"workspace:///android/key.properties", -32002},
		{"workspace:///.env", -32002},
		{"workspace:///.env.production", -32002},
		{"workspace:///android/app/release.jks", -32002},
		{"workspace:///certs/server.pem", -32002},
		{"workspace:///build/app.dart", -32002},
		{"workspace:///lib/logo.png", -32002},
		{"workspace:///./lib/main.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///lib//main.dart", jsonrpc.CodeInvalidParams},
		{"workspace:///", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/main.dart?start=-1", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/main.dart?start=999999", jsonrpc.CodeInvalidParams},
		{"workspace:///lib/main.dart?offset=3", jsonrpc.CodeInvalidParams},
		{"file:///etc/passwd", -32002},
	}
	for _, a := range attempts {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: a.uri})
		if err == nil {
			t.Errorf("read %q succeeded: %q", a.uri, res.Contents[0].Text)
			continue
		}
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Errorf("read %q: error %v is not a JSON-RPC error", a.uri, err)
			continue
		}
		if we.Code != a.code {
			t.Errorf("read %q: code %d (%s), want %d", a.uri, we.Code, we.Message, a.code)
		}
		if strings.Contains(we.Message, marker) {
			t.Errorf("read %q leaked outside content in its error: %s", a.uri, we.Message)
		}
		if len(we.Message) < 20 {
			t.Errorf("read %q: error %q does not say why", a.uri, we.Message)
		}
	}
	// And the daemon is still fine.
	if text, _ := readText(t, cs, "workspace:///lib/main.dart"); text != "void main() {}\n" {
		t.Fatalf("lib/main.dart = %q after the attempts", text)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestReadRanges reads whole files and byte ranges through the shim.
func TestReadRanges(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	root := t.TempDir()
	big := strings.Repeat("0123456789", 200_000) // 2 MB, over the 1 MiB cap
	writeTree(t, root, map[string]string{
		"lib/main.dart": "hello, world\n",
		"lib/bad.dart":  "ok \xff\xfe bytes",
		"lib/big.dart":  big,
	})
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "reader", root, nil)

	text, meta := readText(t, cs, "workspace:///lib/main.dart")
	if text != "hello, world\n" || meta["total"] != float64(13) || meta["start"] != float64(0) || meta["length"] != float64(13) {
		t.Errorf("whole read = %q %v", text, meta)
	}
	text, meta = readText(t, cs, "workspace:///lib/main.dart?start=7&length=5")
	if text != "world" || meta["total"] != float64(13) || meta["start"] != float64(7) || meta["length"] != float64(5) {
		t.Errorf("ranged read = %q %v, want \"world\" total 13 start 7 length 5", text, meta)
	}
	text, meta = readText(t, cs, "workspace:///lib/main.dart?start=7")
	if text != "world\n" || meta["length"] != float64(6) {
		t.Errorf("read from start=7 = %q %v", text, meta)
	}
	if text, _ = readText(t, cs, "workspace:///lib/bad.dart"); text != "ok \uFFFD bytes" {
		t.Errorf("invalid UTF-8 read = %q, want replacement characters", text)
	}
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "workspace:///lib/big.dart"})
	if err == nil || !strings.Contains(err.Error(), "?start=0&length=") {
		t.Errorf("whole read of a 2 MB file: err = %v, want a hint to use a range", err)
	}
	text, meta = readText(t, cs, "workspace:///lib/big.dart?start=1999990&length=100")
	if text != "0123456789" || meta["total"] != float64(2_000_000) {
		t.Errorf("tail of big file = %q %v", text, meta)
	}
}

// TestBigReadsExact: whole reads of large files (which flyd encodes
// outside the SDK, see mcpconn.WebSocket.Stash) come back exactly, escapes, invalid
// UTF-8 and all, also when many run at once on one session and when a file
// holds the text of a placeholder.
func TestBigReadsExact(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var sb strings.Builder
	for i := 0; sb.Len() < 300<<10; i++ {
		fmt.Fprintf(&sb, "line %d: \"quoted\" \\ back </script> & <b> \u2028 tab\t é 🦋 \x00 nul\n", i)
	}
	files := map[string]string{
		"lib/a.dart":     sb.String(),
		"lib/b.dart":     strings.Repeat("b", 1<<20),
		"lib/bad.dart":   strings.Repeat("ok \xff\xfe ", 10_000),
		"lib/fake.dart":  strings.Repeat("\x00fly-splice:0123456789abcdef:1 ", 2_000),
		"lib/small.dart": "tiny\n",
	}
	writeTree(t, root, files)
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	cs := viaShim(e)(t, "reader", root, nil)
	var wg sync.WaitGroup
	for range 4 {
		for name, want := range files {
			wg.Go(func() {
				text, meta := readText(t, cs, "workspace:///"+name)
				want = strings.ToValidUTF8(want, "\uFFFD")
				if text != want {
					t.Errorf("read of %s: %d bytes, want %d (first difference at %d)", name, len(text), len(want), firstDiff(text, want))
				}
				if meta["total"] != float64(len(files[name])) {
					t.Errorf("read of %s: total %v, want %d", name, meta["total"], len(files[name]))
				}
			})
		}
	}
	wg.Wait()
	text, _ := readText(t, cs, "workspace:///lib/a.dart?start=100&length=40000")
	if text != files["lib/a.dart"][100:40100] {
		t.Errorf("ranged read of 40000 bytes differs at %d", firstDiff(text, files["lib/a.dart"][100:40100]))
	}
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSingleInstance: a second flyd on the same state dir exits at once,
// naming the first one's pid.
func TestSingleInstance(t *testing.T) {
	e := flytest.NewEnv(t)
	first := flytest.StartFlyd(t, e)
	flyd, _ := flytest.Binaries(t)
	cmd := exec.Command(flyd, "run")
	cmd.Env = e.Vars
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second flyd: err = %v, want exit status 1\n%s", err, out)
	}
	want := fmt.Sprintf("flyd already running (pid %d)", first.Cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Errorf("second flyd said %q, want it to contain %q", out, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second flyd took %v to give up", d)
	}
	if _, err := getStatus(e); err != nil {
		t.Errorf("first flyd no longer answers: %v", err)
	}
}

// TestTwoDaemonsOneSocket: a second flyd with another state directory but
// the same socket exits, and never removes the live daemon's socket.
func TestTwoDaemonsOneSocket(t *testing.T) {
	e := flytest.NewEnv(t)
	first := flytest.StartFlyd(t, e)
	flyd, _ := flytest.Binaries(t)
	cmd := exec.Command(flyd, "run")
	cmd.Env = append(append([]string{}, e.Vars...), "FLY_STATE_DIR="+filepath.Join(t.TempDir(), "other-state"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second flyd: err = %v, want exit status 1\n%s", err, out)
	}
	want := fmt.Sprintf("flyd already running (pid %d) on socket %s", first.Cmd.Process.Pid, e.Paths.Socket)
	if !strings.Contains(string(out), want) {
		t.Errorf("second flyd said %q, want it to contain %q", out, want)
	}
	if _, err := os.Lstat(e.Paths.Socket); err != nil {
		t.Fatalf("the live daemon's socket is gone: %v", err)
	}
	if st, err := getStatus(e); err != nil || st.PID != first.Cmd.Process.Pid {
		t.Errorf("first flyd no longer answers: %+v, %v", st, err)
	}
}

// TestStaleSocket: after kill -9 the socket file stays behind; the next
// flyd replaces it.
func TestStaleSocket(t *testing.T) {
	e := flytest.NewEnv(t)
	p := flytest.StartFlyd(t, e)
	p.Kill(t)
	if _, err := os.Lstat(e.Paths.Socket); err != nil {
		t.Fatalf("socket should be left behind by kill -9: %v", err)
	}
	flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil || st.PID == p.Cmd.Process.Pid {
		t.Fatalf("new flyd status = %+v, %v", st, err)
	}
}

// TestShimStartsDaemon: with no flyd running, the shim starts one and the
// client never notices.
func TestShimStartsDaemon(t *testing.T) {
	e := flytest.NewEnv(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() {}\n"})
	cs := viaShim(e)(t, "autostart", root, nil)
	st, err := getStatus(e)
	if err != nil {
		t.Fatalf("no daemon after the shim connected: %v", err)
	}
	t.Cleanup(func() { stopPID(t, e, st.PID) })
	if text, _ := readText(t, cs, "workspace:///lib/main.dart"); text != "void main() {}\n" {
		t.Fatalf("read through auto-started daemon = %q", text)
	}
	if _, err := os.Stat(e.Paths.Log()); err != nil {
		t.Errorf("auto-started flyd has no log file: %v", err)
	}
}

// stopPID stops a daemon the test did not start itself and waits until it
// has removed its socket.
func stopPID(t testing.TB, e *flytest.Env, pid int) {
	if err := flytest.Signal(pid, syscall.SIGTERM); err != nil {
		t.Errorf("stop flyd %d: %v", pid, err)
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !flytest.Exists(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("flyd %d still alive 20s after SIGTERM", pid)
}

// TestShimExitsOnEOF: when the editor closes stdin the shim writes the
// replies still in flight, then exits 0, leaving no process behind.
func TestShimExitsOnEOF(t *testing.T) {
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	_, flyctl := flytest.Binaries(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() {}\n"})
	cmd := exec.Command(flyctl, "mcp", "--workspace", root)
	cmd.Env = e.Vars
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"workspace:///lib/main.dart"}}`,
	}, "\n") + "\n"
	cmd.Stdin = strings.NewReader(in) // EOF right after the last request
	var stderr flytest.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }() // owned by the test
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("shim still running 20s after stdin closed\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("shim exit: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"id":2`) || !strings.Contains(lines[1], `void main()`) {
		t.Fatalf("shim stdout = %q, want the initialize reply and the read reply", out)
	}
	// The daemon saw the client go: no session is left behind.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := getStatus(e)
		if err == nil && len(st.Sessions) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still open in flyd after the shim exited: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRecentSessionsSurviveRestart: fly://sessions/recent lists a session
// that ended before flyd restarted, with what it did.
func TestRecentSessionsSurviveRestart(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	d := flytest.StartFlyd(t, e)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() {}\n"})
	first := viaShim(e)(t, "first-editor", root, nil)
	readText(t, first, "workspace:///lib/main.dart")
	first.Close()
	// Wait until flyd has seen the session end.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := getStatus(e); err == nil && len(st.Sessions) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first session never ended")
		}
	}
	d.Stop(t)
	flytest.StartFlyd(t, e)

	second := viaShim(e)(t, "second-editor", root, nil)
	text, _ := readText(t, second, "fly://sessions/recent")
	var recent []wire.Session
	if err := json.Unmarshal([]byte(text), &recent); err != nil {
		t.Fatalf("%s: %v\n%s", "fly://sessions/recent", err, text)
	}
	if len(recent) < 2 || recent[0].ClientName != "second-editor" || recent[1].ClientName != "first-editor" ||
		recent[1].FilesRead != 1 || recent[1].Ended.IsZero() {
		t.Fatalf("recent sessions after a restart = %+v, want second-editor (live) then first-editor (ended, 1 file read)", recent)
	}
}

// TestDamagedDBSurvived damages fly.db between two flyds, as a full disk
// or a half copy does: the next flyd starts anyway, with a new file, keeps
// the damaged one aside, and says so in its log and its status.
func TestDamagedDBSurvived(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"truncated", func(path string) error { return os.Truncate(path, 10000) }},
		{"garbage", func(path string) error {
			return os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 10000), 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := flytest.NewEnv(t)
			first := flytest.StartFlyd(t, e)
			first.Stop(t)
			if err := tc.damage(e.Paths.DB()); err != nil {
				t.Fatal(err)
			}
			second := flytest.StartFlyd(t, e)
			st, err := getStatus(e)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Notices) != 1 || !strings.Contains(st.Notices[0], "damaged") || !strings.Contains(st.Notices[0], ".corrupt-") {
				t.Errorf("status notices = %q, want one saying the db was damaged and where it went", st.Notices)
			}
			if aside, _ := filepath.Glob(e.Paths.DB() + ".corrupt-*"); len(aside) != 1 {
				t.Errorf("moved-aside files = %v, want one", aside)
			}
			if !strings.Contains(second.Stderr.String(), "damaged") {
				t.Errorf("flyd's log does not say the db was damaged:\n%s", second.Stderr)
			}
		})
	}
}
