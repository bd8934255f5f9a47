package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// The loopback TCP listener serves the socket's handler to clients that
// cannot use the socket: HTTP MCP clients, remote tools through a
// forwarded port, the dashboard in a browser. Peer credentials cannot
// guard TCP, so every request carries the bearer token from the state
// directory in its Authorization header; the Host header must be a
// loopback name (a DNS-rebinding page cannot name 127.0.0.1), and a
// browser's cross-origin request is refused.
//
// No credential a browser sends by itself (a cookie, HTTP auth) is
// accepted: browsers send a host's cookies to every port of it (RFC 6265
// §8.5), so any local web server the user visits would get them. The
// dashboard's page takes the token from the URL fragment, which is never
// sent to a server, keeps it in sessionStorage (per origin, port
// included) and sends it as Authorization. Only the page's static files
// are served without the token: they hold no data.
//
// A session over TCP gets flyd's environment and names its workspace in
// the URL: the headers that set a session's environment or root
// (X-Fly-Env, X-Fly-Workspace) are the shim's, honoured on the Unix
// socket only, where the peer is checked to be this user.

// DefaultListen is the loopback address flyd listens on by default.
const DefaultListen = "127.0.0.1:7717"

// CheckListen reports whether addr is an address flyd may listen on: a
// loopback one.
func CheckListen(addr string) error { return checkLoopback(addr) }

// checkLoopback refuses an address that is not a loopback IP or
// "localhost": flyd's API runs commands for whoever holds the token.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %q: flyd listens on loopback addresses only (127.0.0.1, ::1 or localhost): its API runs commands", addr)
}

// listenLoopback listens on addr; if its port is taken (another user's
// flyd on a shared machine), on a free port of the same host, and says so.
func listenLoopback(addr string) (ln net.Listener, note string, err error) {
	if err := checkLoopback(addr); err != nil {
		return nil, "", err
	}
	ln, err = net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err == nil {
			note = fmt.Sprintf("%s is taken (another flyd?): listening on %s instead", addr, ln.Addr())
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, note, nil
}

// tokens holds the bearer token of the TCP listener, kept in a 0600 file
// of the state directory. It changes only when the user rotates it.
type tokens struct {
	path string

	mu  sync.Mutex
	cur string
}

// loadToken reads the token file, creating it with a new token if there
// is none. A file others can read, or that is not ours, is replaced.
func loadToken(path string) (*tokens, error) {
	t := &tokens{path: path}
	if fi, err := os.Lstat(path); err == nil {
		b, rerr := os.ReadFile(path)
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 == 0 && ownedByMe(fi) && rerr == nil && len(strings.TrimSpace(string(b))) >= 32 {
			t.cur = strings.TrimSpace(string(b))
			return t, nil
		}
	}
	if _, err := t.rotate(); err != nil {
		return nil, err
	}
	return t, nil
}

// rotate makes, saves and returns a new token: the old one stops working
// at once.
func (t *tokens) rotate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	tmp := t.path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, t.path)
	}
	if werr != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write token: %w", werr)
	}
	t.mu.Lock()
	t.cur = tok
	t.mu.Unlock()
	return tok, nil
}

func (t *tokens) valid(got string) bool {
	t.mu.Lock()
	cur := t.cur
	t.mu.Unlock()
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(cur)) == 1
}

func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether a browser's Origin is the page flyd serves
// on this Host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && strings.EqualFold(u.Host, host)
}

// guardTCP wraps the API for the TCP listener: loopback Host, the bearer
// token (the dashboard's static files aside), and for a browser's
// upgrades and changes, its own origin only. 401 for no or a wrong token,
// 403 for a wrong Host or Origin.
func (s *Server) guardTCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
		setPageHeaders(w.Header())
		if !loopbackHost(r.Host) {
			http.Error(w, "forbidden: the Host header must name this machine (127.0.0.1, ::1 or localhost)", http.StatusForbidden)
			return
		}
		changes := r.Method != http.MethodGet && r.Method != http.MethodHead
		upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
		if o := r.Header.Get("Origin"); o != "" && (changes || upgrade) && !sameOrigin(o, r.Host) {
			http.Error(w, "forbidden: cross-origin request from "+o, http.StatusForbidden)
			return
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && dashboardFile(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !s.tokens.valid(strings.TrimSpace(tok)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flyd"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <token>; the token is in "+s.cfg.Paths.Token()+" (flyctl token print)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// startTCP starts the loopback listener if the config asks for one. Its
// failure is logged, never fatal: the socket keeps serving. The returned
// function stops it; nil when there is none.
func (s *Server) startTCP() (stop func()) {
	if s.cfg.Listen == "" {
		_ = os.Remove(s.cfg.Paths.HTTPAddr())
		return nil
	}
	var err error
	if s.tokens, err = loadToken(s.cfg.Paths.Token()); err != nil {
		s.log.Error("no loopback listener: cannot keep its token", logErr, err)
		return nil
	}
	ln, note, err := listenLoopback(s.cfg.Listen)
	if err != nil {
		s.log.Error("no loopback listener; the socket still serves", logErr, err)
		return nil
	}
	s.httpAddr = ln.Addr().String()
	if note != "" {
		s.log.Warn(note)
		s.httpWanted = s.cfg.Listen
	}
	if err := os.WriteFile(s.cfg.Paths.HTTPAddr(), []byte(s.httpAddr+"\n"), 0o600); err != nil {
		s.log.Warn("write the listener's address", logErr, err)
	}
	hs := &http.Server{
		Handler:           s.guardTCP(s.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       connIdle,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	capped := &capListener{Listener: ln, cap: tcpConnCap(), log: s.log}
	hs.RegisterOnShutdown(s.closeHTTPSessions)
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := hs.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("loopback listener stopped; the socket still serves", logErr, err)
		}
	}()
	s.log.Info("flyd listening on loopback", "addr", s.httpAddr, "token_file", s.cfg.Paths.Token(), "max_conns", capped.cap)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
		_ = os.Remove(s.cfg.Paths.HTTPAddr())
	}
}

// closeHTTPSessions ends every Streamable HTTP session, so that their
// hanging GET streams let the HTTP servers shut down.
func (s *Server) closeHTTPSessions() {
	s.http.mu.Lock()
	all := make([]*httpSession, 0, len(s.http.m))
	for _, h := range s.http.m {
		all = append(all, h)
	}
	s.http.mu.Unlock()
	for _, h := range all {
		h.close()
	}
}

// serveTokenRotate replaces the token. Only a peer on the socket may: a
// holder of the old token cannot lock its owner out.
func (s *Server) serveTokenRotate(w http.ResponseWriter, r *http.Request) {
	if _, ok := peerFrom(r.Context()); !ok {
		http.Error(w, "rotate the token through the socket (flyctl token rotate)", http.StatusForbidden)
		return
	}
	if s.tokens == nil {
		http.Error(w, "flyd has no loopback listener (flyd run --listen)", http.StatusConflict)
		return
	}
	tok, err := s.tokens.rotate()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
}
