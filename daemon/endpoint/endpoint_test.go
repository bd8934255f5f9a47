package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/owner"
	flypaths "github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wine"
)

// A second flyd is told who holds the lock; once released, it takes it.
func TestAcquire(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flyd.lock")
	first, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	if want := fmt.Sprintf("(pid %d)", os.Getpid()); !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Acquire while held = %v, want ErrAlreadyRunning naming %s", err, want)
	}
	first.Release()
	again, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	again.Release()
}

// openTemp opens an endpoint in a new temporary directory, until the
// test ends, and returns its path.
func openTemp(t *testing.T) (string, net.Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fly") // short: a socket path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := flypaths.Resolve(func(k string) string {
		return map[string]string{flypaths.EnvSocket: filepath.Join(dir, "run", "flyd.sock"), flypaths.EnvStateDir: dir}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, release, err := Open(p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return p.Socket, ln
}

// refusal is a connection a PeerListener refused.
type refusal struct {
	peer Peer
	err  error
}

// servePeers serves HTTP on ln to peers running as user, until the test
// ends: refused gets each connection refused, served the peer of each
// request that reached HTTP, and client dials sock.
func servePeers(t *testing.T, sock string, ln net.Listener, user owner.User) (refused <-chan refusal, served <-chan Peer, client *http.Client) {
	t.Helper()
	ref := make(chan refusal, 4)
	got := make(chan Peer, 4)
	pl := &PeerListener{Listener: ln, User: user, Refuse: func(p Peer, err error) { ref <- refusal{p, err} }}
	hs := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		p, _ := PeerFrom(r.Context())
		got <- p
	})}
	go hs.Serve(pl) // stopped by hs.Close at the test's end
	t.Cleanup(func() { hs.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ipc.Dial(ctx, sock) }}}
	return ref, got, c
}

// A connection from this user reaches the handler with its peer: this
// process, as this user.
func TestPeerListener(t *testing.T) {
	sock, ln := openTemp(t)
	refused, got, c := servePeers(t, sock, ln, owner.Current())
	resp, err := c.Get("http://flyd/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case p := <-got:
		if p.User != owner.Current() || (p.PID != 0 && p.PID != os.Getpid()) {
			t.Errorf("peer = %+v, want this user and process %d", p, os.Getpid())
		}
	case r := <-refused:
		t.Fatalf("own connection refused: %v", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the request reached neither the handler nor the refusal within a minute")
	}
	// A second flyd on the same endpoint is told one runs there.
	if _, _, err := Open(sock); !errors.Is(err, ErrAlreadyRunning) {
		wine.SkipUnder(t, "Wine does not enforce FILE_FLAG_FIRST_PIPE_INSTANCE")
		t.Errorf("Open(an endpoint in use) = %v, want ErrAlreadyRunning", err)
	}
}

// TestPeerOfOtherUserRefused: a connection whose peer is not flyd's user
// never reaches HTTP: the listener closes it and hands the peer, as the
// endpoint read it (pid, token, SID on Windows; the socket's credentials
// on Unix), to Refuse, which flyd logs. Here flyd's user is made someone
// else, so that this process's own connection is the stranger's.
func TestPeerOfOtherUserRefused(t *testing.T) {
	sock, ln := openTemp(t)
	refused, served, c := servePeers(t, sock, ln, someoneElse())
	if resp, err := c.Get("http://flyd/"); err == nil {
		resp.Body.Close()
		t.Errorf("a peer of another user got an answer: %s", resp.Status)
	}
	select {
	case r := <-refused:
		if r.err != nil || r.peer.User != owner.Current() {
			t.Errorf("refused peer = %+v, %v; want this process's user, read without error", r.peer, r.err)
		}
	case <-served:
		t.Fatal("a peer of another user reached HTTP")
	case <-time.After(time.Minute):
		t.Fatal("the connection was neither refused nor served within a minute")
	}
	select {
	case <-served:
		t.Fatal("a peer of another user reached HTTP")
	default:
	}
}
