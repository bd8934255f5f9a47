package loopback

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/wine"
)

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7717", true},
		{"[::1]:0", true},
		{"localhost:80", true},
		{"0.0.0.0:7717", false},
		{"192.168.1.2:7717", false},
		{"example.com:7717", false},
		{"127.0.0.1", false},
	} {
		if err := CheckListen(tc.addr); (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

// TestGuard: only a loopback Host, a same-origin browser and the bearer
// token get through; nothing a browser sends by itself does.
func TestGuard(t *testing.T) {
	tok, err := LoadTokens(filepath.Join(t.TempDir(), "token"))
	if err != nil {
		t.Fatal(err)
	}
	good := "Bearer " + tok.cur
	h := tok.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "through") }),
		func(p string) bool { return p == "/" })
	for _, tc := range []struct {
		name, method, path, host string
		header                   map[string]string
		want                     int
	}{
		{"token", "GET", "/v1/status", "127.0.0.1:7717", map[string]string{"Authorization": good}, 200},
		{"localhost", "GET", "/v1/status", "localhost:7717", map[string]string{"Authorization": good}, 200},
		{"no token", "GET", "/v1/status", "127.0.0.1:7717", nil, 401},
		{"wrong token", "GET", "/v1/status", "127.0.0.1:7717", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"cookie", "GET", "/v1/status", "127.0.0.1:7717", map[string]string{"Cookie": "token=" + tok.cur}, 401},
		{"query", "GET", "/v1/status?token=" + tok.cur, "127.0.0.1:7717", nil, 401},
		{"basic auth", "GET", "/v1/status", "127.0.0.1:7717", map[string]string{"Authorization": "Basic " + tok.cur}, 401},
		{"rebinding host", "GET", "/v1/status", "evil.example:7717", map[string]string{"Authorization": good}, 403},
		{"cross-origin change", "POST", "/v1/runs/x/stop", "127.0.0.1:7717", map[string]string{"Authorization": good, "Origin": "http://evil.example"}, 403},
		{"cross-origin upgrade", "GET", "/v1/mcp", "127.0.0.1:7717", map[string]string{"Authorization": good, "Origin": "http://evil.example", "Upgrade": "websocket"}, 403},
		{"same-origin change", "POST", "/v1/runs/x/stop", "127.0.0.1:7717", map[string]string{"Authorization": good, "Origin": "http://127.0.0.1:7717"}, 200},
		{"public page", "GET", "/", "127.0.0.1:7717", nil, 200},
		{"public page, foreign host", "GET", "/", "evil.example", nil, 403},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Host = tc.host
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %s %s = %d %q, want %d", tc.name, tc.method, tc.path, w.Code, w.Body, tc.want)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate", tc.name)
		}
	}
}

// TestListenTakenPort: a port another socket holds is not fatal: flyd
// listens on a free port of the same host, and says so.
func TestListenTakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ln, note, err := Listen(taken.Addr().String())
	if err != nil {
		t.Fatalf("Listen(a taken port) = %v, want a free port instead", err)
	}
	defer ln.Close()
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	if host != "127.0.0.1" || ln.Addr().String() == taken.Addr().String() || !strings.Contains(note, "is taken") {
		t.Errorf("Listen(%s) = %s, note %q; want another port of 127.0.0.1, and a note that says why", taken.Addr(), ln.Addr(), note)
	}
}

// TestTokens: a token file others can read is replaced; Rotate ends the
// old token at once; the file is the user's alone, and kept across
// restarts.
func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	leaked := strings.Repeat("a", 64)
	if err := os.WriteFile(path, []byte(leaked+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flytest.LetOthersRead(t, path)
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.valid(leaked) {
		t.Fatal("a token from a world-readable file is still valid")
	}
	old := tok.cur
	fresh, err := tok.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if tok.valid(old) || !tok.valid(fresh) || tok.valid("") {
		t.Fatal("after Rotate the old token still works, or the new one does not")
	}
	wine.SkipUnder(t, "it keeps no access list on a file (it makes one up from the Unix mode): no file is the user's alone, so each start replaces the token")
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := owner.Secret(path, fi); err != nil || !ok {
		t.Fatalf("owner.Secret(token file) = %v, %v; want it the user's alone", ok, err)
	}
	again, err := LoadTokens(path)
	if err != nil || again.cur != tok.cur {
		t.Fatalf("a restart changed a good token (%v)", err)
	}
}

// TestLimit: a listener at its cap closes further connections at once,
// and takes new ones when one closes.
func TestLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &capListener{Listener: ln, cap: 2, log: slog.New(slog.DiscardHandler)}
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	done := make(chan struct{})
	go func() { // owned by the test: ends when l closes
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	first, second := <-accepted, <-accepted
	defer second.Close()
	refused := dial()
	defer refused.Close()
	_ = refused.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := refused.Read(make([]byte, 1)); err == nil {
		t.Fatalf("a third connection read %d bytes: it was not closed", n)
	}
	first.Close()
	later := dial()
	defer later.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("no connection accepted after one closed")
	}
	l.Close()
	<-done
	for len(accepted) > 0 {
		(<-accepted).Close()
	}
}
