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

// TestTokens: a token file others can read is replaced; a good one is
// kept across restarts; Rotate ends the old token at once.
func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	leaked := strings.Repeat("a", 64)
	if err := os.WriteFile(path, []byte(leaked+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.valid(leaked) {
		t.Fatal("a token from a world-readable file is still valid")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	again, err := LoadTokens(path)
	if err != nil || again.cur != tok.cur {
		t.Fatalf("a restart changed a good token (%v)", err)
	}
	old := tok.cur
	fresh, err := tok.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if tok.valid(old) || !tok.valid(fresh) || tok.valid("") {
		t.Fatal("after Rotate the old token still works, or the new one does not")
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
