package loopback

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/wire"
)

// DefaultListen is the loopback address flyd listens on by default.
const DefaultListen = wire.DefaultListen

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

// Listen listens on addr; if its port is taken (another user's
// flyd on a shared machine), on a free port of the same host, and says so.
func Listen(addr string) (ln net.Listener, note string, err error) {
	if err := checkLoopback(addr); err != nil {
		return nil, "", err
	}
	ln, err = net.Listen("tcp", addr)
	if addrInUse(err) {
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

// Tokens holds the bearer token of the TCP listener, kept in a 0600 file
// of the state directory. It changes only when the user rotates it. Its
// methods may be called concurrently.
type Tokens struct {
	path string

	mu  sync.Mutex
	cur string
}

// LoadTokens reads the token file, creating it with a new token if there
// is none. A file others can read, or that is not ours, is replaced.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if fi, err := os.Lstat(path); err == nil {
		b, rerr := os.ReadFile(path)
		if fi.Mode().IsRegular() && secret(path, fi) && rerr == nil && len(strings.TrimSpace(string(b))) >= 32 {
			t.cur = strings.TrimSpace(string(b))
			return t, nil
		}
	}
	if _, err := t.Rotate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Rotate makes, saves and returns a new token: the old one stops working
// at once.
func (t *Tokens) Rotate() (string, error) {
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
	// The user's alone before the token is in it: on Windows the mode
	// above means nothing, and the file would take the directory's
	// access list.
	werr := owner.Restrict(tmp)
	if werr == nil {
		_, werr = f.WriteString(tok + "\n")
	}
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

func (t *Tokens) valid(got string) bool {
	t.mu.Lock()
	cur := t.cur
	t.mu.Unlock()
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(cur)) == 1
}

// secret reports whether the token file is the user's alone.
func secret(path string, fi os.FileInfo) bool {
	ok, err := owner.Secret(path, fi)
	return ok && err == nil
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

// Guard wraps the API for the TCP listener: loopback Host, the bearer
// token (except for the paths public reports, the dashboard's static
// files), and for a browser's upgrades and changes, its own origin only.
// 401 for no or a wrong token, 403 for a wrong Host or Origin. Headers
// every answer carries are set before it, by the caller.
func (t *Tokens) Guard(next http.Handler, public func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && public(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !t.valid(strings.TrimSpace(tok)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flyd"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <token>; the token is in "+t.path+" (flyctl token print)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
