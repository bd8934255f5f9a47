package localclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// socketPath is an endpoint of its own: a socket path in a fresh
// directory of this user's, short enough for sun_path (t.TempDir can be
// too long), or on Windows the pipe that path names.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: filepath.Join(dir, "flyd.sock"), paths.EnvStateDir: dir}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.Socket
}

// serve answers requests on a fresh socket with h, as flyd of this
// protocol would, and returns a client of it.
func serve(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	sock := socketPath(t)
	ln, err := ipc.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln) // owned by the test: Close stops it
	c := New(sock)
	t.Cleanup(func() {
		c.CloseIdleConnections()
		srv.Close()
	})
	return c
}

// flyd writes the version header flyd sends, then body with status.
func flyd(w http.ResponseWriter, status int, body string) {
	w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestNoDaemon(t *testing.T) {
	sock := socketPath(t)
	_, err := New(sock).Status(context.Background())
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "flyd run") {
		t.Errorf("Status with no flyd = %v, want ErrNoDaemon naming %s with a hint", err, sock)
	}
}

func TestAPIError(t *testing.T) {
	for _, tc := range []struct {
		status   int
		body     string
		want     string
		notFound bool
	}{
		{404, `{"error":"no run abc","hint":"flyctl runs lists them"}`, "no run abc; flyctl runs lists them", true},
		{400, `{"error":"bad pattern"}`, "bad pattern", false},
		{500, "the store is closed\n", "the store is closed", false},
		{503, "", "flyd answered 503 Service Unavailable", false},
	} {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) { flyd(w, tc.status, tc.body) })
		_, err := c.Run(context.Background(), "abc")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tc.status || err.Error() != tc.want || IsNotFound(err) != tc.notFound {
			t.Errorf("Run against %d %q = %v, want an APIError %q (not found: %v)", tc.status, tc.body, err, tc.want, tc.notFound)
		}
	}
}

// TestPeerVersion: a flyd of another protocol is refused with which side
// to upgrade, but Ping still finds it.
func TestPeerVersion(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, "9.9.9 protocol=99")
		io.WriteString(w, `{"pid": 4242}`)
	})
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "upgrade flyctl") {
		t.Errorf("Status of a newer flyd = %v, want an error saying to upgrade flyctl", err)
	}
	if pid, err := c.Ping(context.Background()); pid != 4242 || err != nil {
		t.Errorf("Ping of a newer flyd = %d, %v; want 4242", pid, err)
	}
}

// TestRequests: each method asks for what it says.
func TestRequests(t *testing.T) {
	var got string
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.RequestURI()
		if r.Header.Get(wire.HeaderVersion) != wire.VersionHeader() {
			t.Errorf("%s without the version header", got)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/logs"):
			flyd(w, 200, `{"type":"end","state":"exited","last_seq":3}`+"\n")
		default:
			flyd(w, 200, `{}`)
		}
	})
	ctx := context.Background()
	for _, tc := range []struct {
		call func() error
		want string
	}{
		{func() error { return closed(c.Logs(ctx, "r/1", LogsOptions{Tail: AllLines})) }, "GET /v1/runs/r%2F1/logs?after=0"},
		{func() error { return closed(c.Logs(ctx, "r", LogsOptions{After: 7, Tail: 0, Follow: true})) }, "GET /v1/runs/r/logs?after=7&follow=1&tail=0"},
		{func() error { _, _, err := c.Errors(ctx, "r", true); return err }, "GET /v1/runs/r/errors?all=1"},
		{func() error { return closed(c.FollowErrors(ctx, "r", false)) }, "GET /v1/runs/r/errors?follow=1"},
		{func() error { _, err := c.Screenshot(ctx, "r", 540); return err }, "GET /v1/runs/r/screenshot?max_width=540"},
		{func() error { _, _, err := c.Stop(ctx, "r"); return err }, "POST /v1/runs/r/stop"},
		{func() error { _, err := c.RestartUpstream(ctx, "*"); return err }, "POST /v1/upstreams/%2A/restart"},
		{func() error { _, err := c.RotateToken(ctx); return err }, "POST /v1/token/rotate"},
		{func() error {
			_, err := c.Grep(ctx, GrepQuery{Workspace: "/w", Pattern: "a b", IgnoreCase: true, Limit: 10, Cursor: "c1"})
			return err
		}, "GET /v1/grep?context=0&cursor=c1&i=1&limit=10&pattern=a+b&workspace=%2Fw"},
	} {
		got = ""
		if err := tc.call(); err != nil || got != tc.want {
			t.Errorf("request = %q, %v; want %q", got, err, tc.want)
		}
	}
}

// closed closes a stream a test opened only to see its request.
func closed[T any](s *Stream[T], err error) error {
	if err != nil {
		return err
	}
	return s.Close()
}

// TestRunsKeepRaw: a run's fields this build does not know reach the
// caller, for --json.
func TestRunsKeepRaw(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		flyd(w, 200, `{"runs":[{"run_id":"r1","state":"running","future":1}],"apps":[{"app_id":"a1","future":2}]}`)
	})
	l, err := c.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 || l.Runs[0].RunID != "r1" || !l.Runs[0].Live() || !strings.Contains(string(l.RawRuns[0]), `"future":1`) {
		t.Errorf("Runs = %+v, raw %s; want r1, running, with its unknown field", l.Runs, l.RawRuns)
	}
	if len(l.Apps) != 1 || l.Apps[0].ID != "a1" || !strings.Contains(string(l.RawApps[0]), `"future":2`) {
		t.Errorf("Runs apps = %+v, raw %s; want a1 with its unknown field", l.Apps, l.RawApps)
	}
}

type pipe struct{ io.Reader }

func (pipe) Close() error { return nil }

// TestStream: whole lines in order, the end of a stream told from a cut.
func TestStream(t *testing.T) {
	long := `{"type":"entry","text":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
	for _, tc := range []struct {
		in      string
		types   []string
		wantErr error
		errText string
	}{
		{"", nil, io.EOF, ""},
		{`{"type":"entry"}` + "\n" + `{"type":"end"}` + "\n", []string{"entry", "end"}, io.EOF, ""},
		{`{"type":"entry"}` + "\n" + `{"type":"en`, []string{"entry"}, io.ErrUnexpectedEOF, ""},
		{`{"type":"entry"}` + "\nnot json\n", []string{"entry"}, nil, `malformed line "not json"`},
		{long, nil, nil, "over 16777216 bytes"},
	} {
		s := newStream[wire.LogLine](pipe{strings.NewReader(tc.in)})
		var types []string
		var err error
		for {
			var l wire.LogLine
			if l, err = s.Next(); err != nil {
				break
			}
			types = append(types, l.Type)
		}
		in := tc.in[:min(len(tc.in), 40)]
		if strings.Join(types, ",") != strings.Join(tc.types, ",") {
			t.Errorf("Next of %q read %v, want %v", in, types, tc.types)
		}
		if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.errText != "" && !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("Next of %q ended with %v, want %v %q", in, err, tc.wantErr, tc.errText)
		}
	}
}
