package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// TestCLIAgainstFlyd runs the read verbs and stop against a real flyd
// with one live run of the fake app, comparing their output with
// goldens.
func TestCLIAgainstFlyd(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=5", fakeflutter.EnvLines+"=20", fakeflutter.EnvAppID+"=app-1")
	flyd := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs, shimPID := mcpSession(t, e, root)
	id := startRun(t, cs)
	waitLog(t, e.Getenv, id, "20 ticks", func(l []map[string]any) bool { return countTicks(l) == 20 })

	var ri runInfo
	if err := json.Unmarshal([]byte(mustFlyctl(t, e.Getenv, "runs", "--all", "--json")), &struct {
		Runs []*runInfo `json:"runs"`
	}{Runs: []*runInfo{&ri}}); err != nil {
		t.Fatal(err)
	}
	if ri.RunID != id || ri.PID == 0 {
		t.Fatalf("runs --json = %+v, want run %s with a pid", ri, id)
	}
	n := &normalizer{}
	n.add(id, "<RUN>")
	n.add(root, "<ROOT>")
	n.add(e.Paths.Socket, "<SOCKET>")
	n.add(e.Paths.DB(), "<STATE>/fly.db") // with Windows's separator too
	n.add(e.Paths.StateDir, "<STATE>")
	if b, err := os.ReadFile(e.Paths.HTTPAddr()); err == nil {
		n.add(strings.TrimSpace(string(b)), "<HTTP>")
	}
	pids := map[int]string{flyd.Cmd.Process.Pid: "<FLYD_PID>", shimPID: "<SHIM_PID>", ri.PID: "<RUN_PID>"}
	norm := func(s string) string {
		s = n.apply(s)
		for pid, name := range pids {
			s = regexp.MustCompile(`\b`+strconv.Itoa(pid)+`\b`).ReplaceAllString(s, name)
		}
		return s
	}

	// The workspace is listed once it is indexed.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(mustFlyctl(t, e.Getenv, "status"), root) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Run("status", func(t *testing.T) {
		checkGolden(t, "cli/status.golden", norm(mustFlyctl(t, e.Getenv, "status")))
		var st map[string]any
		if err := json.Unmarshal([]byte(mustFlyctl(t, e.Getenv, "status", "--json")), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		for _, k := range []string{"version", "pid", "socket", "state_dir", "db_bytes", "sessions", "workspaces", "runs"} {
			if _, ok := st[k]; !ok {
				t.Errorf("status --json lacks %q: %v", k, st)
			}
		}
	})
	t.Run("runs", func(t *testing.T) {
		out := mustFlyctl(t, e.Getenv, "runs", "--all")
		checkGolden(t, "cli/runs.golden", norm(out))
		if got := mustFlyctl(t, e.Getenv, "runs", "--workspace", root); got != out {
			t.Errorf("runs --workspace ROOT =\n%s\nwant the same as runs --all:\n%s", got, out)
		}
		t.Chdir(filepath.Join(root, "lib"))
		if got := mustFlyctl(t, e.Getenv, "runs"); got != out {
			t.Errorf("runs in a subdirectory of the workspace =\n%s\nwant the same as runs --all:\n%s", got, out)
		}
	})
	t.Run("logs tail -n 5", func(t *testing.T) {
		checkGolden(t, "cli/logs_tail_n5.golden", norm(mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "5")))
	})
	t.Run("logs tail -o json -n 3", func(t *testing.T) {
		out := mustFlyctl(t, e.Getenv, "logs", "tail", id, "-o", "json", "-n", "3")
		checkGolden(t, "cli/logs_tail_json_n3.golden", norm(out))
		lines := jsonLines(t, out)
		for _, l := range lines {
			if want := id + ":" + strconv.Itoa(int(l["seq"].(float64))); l["cursor"] != want {
				t.Errorf("line %v: cursor = %v, want %s", l, l["cursor"], want)
			}
		}
		if got := mustFlyctl(t, e.Getenv, "logs", "tail", id, "--json", "-n", "3"); got != out {
			t.Errorf("--json =\n%s\nwant the same as -o json:\n%s", got, out)
		}
	})
	t.Run("logs tail filters", func(t *testing.T) {
		out := mustFlyctl(t, e.Getenv, "logs", "tail", id, "-g", `tick 1\d$`, "-n", "3")
		if want := "stdout flutter: tick 17\nstdout flutter: tick 18\nstdout flutter: tick 19\n"; out != want {
			t.Errorf("-g 'tick 1\\d$' -n 3 =\n%s\nwant\n%s", out, want)
		}
		if out := mustFlyctl(t, e.Getenv, "logs", "tail", id, "--since", "1h", "-g", "tick 7$"); out != "stdout flutter: tick 7\n" {
			t.Errorf("--since 1h -g 'tick 7$' = %q, want the one line", out)
		}
		if out := mustFlyctl(t, e.Getenv, "logs", "tail", id, "--until", "1h", "-n", "all"); out != "" {
			t.Errorf("--until 1h (an hour ago) = %q, want nothing", out)
		}
		if out := mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "0"); out != "" {
			t.Errorf("-n 0 = %q, want nothing", out)
		}
		out = mustFlyctl(t, e.Getenv, "logs", "tail", id, "-t", "-n", "1")
		if !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} stdout flutter: tick 20\n$`).MatchString(out) {
			t.Errorf("-t -n 1 = %q, want a local time, the stream and the text", out)
		}
		lines := jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-o", "json", "-n", "all"))
		mid := int(lines[len(lines)-4]["seq"].(float64))
		after := jsonLines(t, mustFlyctl(t, e.Getenv, "logs", "tail", id, "-o", "json", "--after", strconv.Itoa(mid)))
		if len(after) != 3 || int(after[0]["seq"].(float64)) != mid+1 {
			t.Errorf("--after %d = %v, want the 3 lines after it", mid, after)
		}
	})
	t.Run("logs tail by prefix and --latest", func(t *testing.T) {
		want := mustFlyctl(t, e.Getenv, "logs", "tail", id, "-n", "2")
		if got := mustFlyctl(t, e.Getenv, "logs", "tail", id[:len(id)-3], "-n", "2"); got != want {
			t.Errorf("logs tail by prefix = %q, want %q", got, want)
		}
		if got := mustFlyctl(t, e.Getenv, "logs", "tail", "--latest", "-n", "2"); got != want {
			t.Errorf("logs tail --latest = %q, want %q", got, want)
		}
		_, errs, code := flyctl(t, e.Getenv, "logs", "tail", "zzzz")
		if code != 1 || !strings.Contains(errs, `no such run "zzzz"`) || !strings.Contains(errs, "flyctl runs --all") {
			t.Errorf("logs tail zzzz: exit %d, stderr %q; want 1 and no such run with a hint", code, errs)
		}
	})
	t.Run("stop", func(t *testing.T) {
		out := mustFlyctl(t, e.Getenv, "stop", id[:12])
		if want := "run " + id + ": stopped (exit code 0)\n"; out != want {
			t.Errorf("stop = %q, want %q", out, want)
		}
		out = mustFlyctl(t, e.Getenv, "stop", id, "--json")
		var got runInfo
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.State != "stopped" || got.ExitCode == nil {
			t.Errorf("stop --json of a stopped run = %s (%v), want its record", out, err)
		}
		if out := mustFlyctl(t, e.Getenv, "stop", id); !strings.Contains(out, "already ended") {
			t.Errorf("stopping again = %q, want it to say the run had already ended", out)
		}
		_, errs, code := flyctl(t, e.Getenv, "stop", "nosuchrun")
		if code != 1 || !strings.Contains(errs, `no such run "nosuchrun"`) {
			t.Errorf("stop nosuchrun: exit %d, stderr %q; want 1 and no such run", code, errs)
		}
		// Not live, and not in the current directory's workspace: not listed.
		t.Chdir(t.TempDir())
		out, errs, code = flyctl(t, e.Getenv, "runs")
		if code != 0 || out != "" || !strings.Contains(errs, "no runs in") {
			t.Errorf("runs elsewhere: exit %d, stdout %q, stderr %q; want 0, nothing, a note", code, out, errs)
		}
		if out := mustFlyctl(t, e.Getenv, "runs", "--json"); strings.TrimSpace(out) != "{\n  \"runs\": [],\n  \"apps\": []\n}" {
			t.Errorf("runs --json elsewhere = %q, want an empty list", out)
		}
		// A build lists the client that started it, as a run does.
		var build struct {
			BuildID string `json:"build_id"`
		}
		callTool(t, cs, "flutter_build", map[string]any{"platform": "linux"}, &build)
		n.add(build.BuildID, "<BUILD>")
		checkGolden(t, "cli/runs_stopped.golden", norm(mustFlyctl(t, e.Getenv, "runs", "--all")))
	})
}

// TestRunsTableGolden: the runs table says who started each run and
// build, and a line under it says what ERRORS holds when a row counts
// errors in two ways; status says the same of its live runs.
func TestRunsTableGolden(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 30, 0, 0, time.Local)
	code := 0
	runs := []runInfo{
		{RunID: "01run", Kind: "run", State: "running", Root: "/src/app", Argv: []string{"flutter", "run", "--machine", "-d", "linux"}, StartedAt: at,
			StartedBy: &wire.Actor{Client: "claude-code"}, Errors: &wire.Errors{Total: 17, Distinct: 3, Current: 2}},
		{RunID: "01bld", Kind: "build", State: "exited", ExitCode: &code, Root: "/src/app", Argv: []string{"flutter", "build", "linux"}, StartedAt: at,
			StartedBy: &wire.Actor{Client: "cursor-vscode"}},
		{RunID: "01old", Kind: "run", State: "stopped", ExitCode: &code, Root: "/src/app", Argv: []string{"flutter", "run", "--machine"}, StartedAt: at,
			Errors: &wire.Errors{Total: 1, Distinct: 1, Current: 1}},
		{RunID: "01up", Kind: "upstream", State: "running", Root: "/src/app", Argv: []string{"dart", "mcp-server"}, StartedAt: at},
		{RunID: "01anon", Kind: "tool", State: "exited", ExitCode: &code, Root: "/src/app", Argv: []string{"flutter", "devices", "--machine"}, StartedAt: at,
			StartedBy: &wire.Actor{}},
	}
	var b strings.Builder
	if err := writeRunsTable(&b, runs, at, false); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	st := &wire.Status{Version: "1.2.3", Protocol: 1, PID: 42, UptimeSec: 61, Socket: "/run/fly.sock", StateDir: "/state",
		Runs: []wire.Run{runs[0], runs[3]}}
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := strings.NewReplacer(at.Format(time.RFC3339), "<TIME>", paths.Paths{StateDir: "/state"}.DB(), "<STATE>/fly.db").Replace(b.String())
	checkGolden(t, "cli/runs_table.golden", out)
}

// TestCLINoFlyd: every verb that needs flyd fails with exit 1 and the
// hint to start it.
func TestCLINoFlyd(t *testing.T) {
	e := flytest.NewEnv(t)
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"runs"}, {"runs", "--all", "--json"}, {"stop", "abc"},
		{"logs", "tail", "abc"}, {"logs", "tail", "--latest", "-f"},
	} {
		out, errs, code := flyctl(t, e.Getenv, args...)
		if code != 1 || out != "" {
			t.Errorf("flyctl %s without flyd: exit %d, stdout %q; want 1 and nothing", strings.Join(args, " "), code, out)
		}
		for _, want := range []string{"flyd is not running", e.Paths.Socket, "try: flyctl service start", "flyd run"} {
			if !strings.Contains(errs, want) {
				t.Errorf("flyctl %s without flyd: stderr %q lacks %q", strings.Join(args, " "), errs, want)
			}
		}
	}
}

// TestCLIVersionMismatch: a flyd of another protocol gets an error that
// says which side to upgrade.
func TestCLIVersionMismatch(t *testing.T) {
	for _, tc := range []struct {
		header, upgrade string
	}{
		{"9.0.0 protocol=99", "upgrade flyctl"},
		{"0.0.1 protocol=0", "upgrade flyd"},
	} {
		e := flytest.NewEnv(t)
		os.MkdirAll(filepath.Dir(e.Paths.Socket), 0o700)
		ln, err := ipc.Listen(e.Paths.Socket)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(wire.HeaderVersion, tc.header)
			w.Write([]byte(`{"runs":[]}`))
		})}
		go srv.Serve(ln) // ended by Close below
		for _, args := range [][]string{{"status"}, {"runs", "--all"}, {"logs", "tail", "x"}} {
			_, errs, code := flyctl(t, e.Getenv, args...)
			if code != 1 || !strings.Contains(errs, tc.upgrade) {
				t.Errorf("flyctl %s against %q: exit %d, stderr %q; want 1 and %q", strings.Join(args, " "), tc.header, code, errs, tc.upgrade)
			}
		}
		srv.Close()
	}
}

// TestCLIUsage: usage errors exit 2 with nothing on stdout, before any
// connection (there is no flyd here); --help exits 0, prints to stdout
// and ends with examples.
func TestCLIUsage(t *testing.T) {
	e := flytest.NewEnv(t)
	cursor := filepath.Join(t.TempDir(), "cursor")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs"}, "logs needs a verb"},
		{[]string{"logs", "head"}, `unknown logs verb "head"`},
		{[]string{"logs", "tail"}, "needs a RUN or --latest"},
		{[]string{"logs", "tail", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"logs", "tail", "abc", "-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"logs", "tail", "abc", "--json", "-o", "text"}, "contradict"},
		{[]string{"logs", "tail", "abc", "--latest"}, "not both"},
		{[]string{"logs", "tail", "abc", "def"}, "takes one RUN"},
		{[]string{"logs", "tail", "abc", "-n", "-1"}, "want a number of lines"},
		{[]string{"logs", "tail", "abc", "-n", "many"}, "want a number of lines"},
		{[]string{"logs", "tail", "abc", "--since", "yesterday"}, "--since"},
		{[]string{"logs", "tail", "abc", "--since", "-5m"}, "cannot be negative"},
		{[]string{"logs", "tail", "abc", "--since", "1m", "--until", "1h"}, "is before --since"},
		{[]string{"logs", "tail", "abc", "-f", "--until", "1m"}, "--until cannot be combined with -f"},
		{[]string{"logs", "tail", "abc", "-g", "("}, "-g"},
		{[]string{"logs", "tail", "abc", "--after", "x"}, "--after"},
		{[]string{"logs", "tail", "abc", "--after", "3", "--cursor-file", cursor}, "give one"},
		{[]string{"logs", "tail", "--cursor-file", cursor}, "does not exist yet"},
		{[]string{"runs", "abc"}, "takes no arguments"},
		{[]string{"runs", "--all", "--workspace", "."}, "cannot be combined"},
		{[]string{"runs", "--jsn"}, "unknown flag: --jsn"},
		{[]string{"stop"}, "needs the RUN"},
		{[]string{"stop", "a", "b"}, "takes one RUN"},
		{[]string{"status", "x"}, "takes no arguments"},
		{[]string{"config"}, "config needs a verb"},
		{[]string{"config", "editor"}, `unknown config verb "editor"`},
		{[]string{"config", "mcp"}, "needs --client"},
		{[]string{"config", "mcp", "--client", "emacs"}, `unknown --client "emacs"`},
		{[]string{"config", "mcp", "--client", "vscode", "--workspace", filepath.Join(e.Dir, "missing")}, "does not exist"},
	} {
		out, errs, code := flyctl(t, e.Getenv, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("flyctl %q: exit %d, stdout %q, stderr %q; want 2, nothing, and %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, args := range [][]string{
		{"logs", "--help"}, {"logs", "tail", "--help"}, {"logs", "tail", "-h"}, {"runs", "--help"},
		{"stop", "--help"}, {"status", "--help"}, {"config", "--help"}, {"config", "mcp", "--help"},
	} {
		out, errs, code := flyctl(t, e.Getenv, args...)
		if code != 0 || errs != "" || !strings.Contains(out, "Usage:") || !strings.Contains(out, "\nExamples:\n") {
			t.Errorf("flyctl %q: exit %d, stderr %q, stdout %q; want 0 and usage with examples", args, code, errs, out)
		}
		examples := out[strings.LastIndex(out, "\nExamples:\n"):]
		if strings.Contains(examples, "Flags:") {
			t.Errorf("flyctl %q: the help does not end with its examples:\n%s", args, out)
		}
	}
}

func TestRelative(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"},
		{42 * time.Second, "42s ago"},
		{5*time.Minute + 10*time.Second, "5m ago"},
		{3 * time.Hour, "3h ago"},
		{47 * time.Hour, "47h ago"},
		{72 * time.Hour, "3d ago"},
	} {
		if got := relative(tc.d); got != tc.want {
			t.Errorf("relative(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestInWorkspace(t *testing.T) {
	for _, tc := range []struct {
		root, dir string
		want      bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c/d", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/x/..b", false},
		{"", "/a", false},
	} {
		if got := inWorkspace(tc.root, tc.dir); got != tc.want {
			t.Errorf("inWorkspace(%q, %q) = %v, want %v", tc.root, tc.dir, got, tc.want)
		}
	}
}

func TestNewestRun(t *testing.T) {
	runs := []runInfo{ // newest first, as flyd lists them
		{RunID: "5", Kind: "tool", Root: "/w"},
		{RunID: "4", Kind: "run", Root: "/other"},
		{RunID: "3", Kind: "build", Root: "/w"},
		{RunID: "2", Kind: "run", Root: "/w"},
	}
	for _, tc := range []struct {
		dir, want string
	}{
		{"/w", "3"},
		{"/w/lib", "3"},
		{"/other", "4"},
		{"/elsewhere", "4"},
	} {
		if got, ok := newestRun(runs, tc.dir); !ok || got.RunID != tc.want {
			t.Errorf("newestRun(in %s) = %s, want %s", tc.dir, got.RunID, tc.want)
		}
	}
	if _, ok := newestRun(runs[:1], "/w"); ok {
		t.Errorf("newestRun(only a tool) found one, want none")
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"flutter", "run", "--dart-define", "A=b c", "it's", ""})
	if want := `flutter run --dart-define 'A=b c' 'it'\''s' ''`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {32 << 20, "32.0 MiB"}, {3 << 30, "3.0 GiB"}, {5 << 40, "5120.0 GiB"}} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
