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

// A connection from this user reaches the handler with its peer: this
// process, as this user.
func TestPeerListener(t *testing.T) {
	sock, ln := openTemp(t)
	refused := make(chan error, 1)
	pl := &PeerListener{Listener: ln, User: owner.Current(), Refuse: func(_ Peer, err error) { refused <- err }}
	got := make(chan Peer, 1)
	hs := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PeerFrom(r.Context())
		got <- p
	})}
	go hs.Serve(pl) // stopped by hs.Close below
	t.Cleanup(func() { hs.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ipc.Dial(ctx, sock) }}}
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
	case err := <-refused:
		t.Fatalf("own connection refused: %v", err)
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
	type refusal struct {
		peer Peer
		err  error
	}
	refused := make(chan refusal, 4)
	pl := &PeerListener{Listener: ln, User: someoneElse(), Refuse: func(p Peer, err error) { refused <- refusal{p, err} }}
	served := make(chan struct{}, 1)
	hs := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served <- struct{}{} })}
	go hs.Serve(pl) // stopped by hs.Close below
	t.Cleanup(func() { hs.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ipc.Dial(ctx, sock) }}}
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
	}
	select {
	case <-served:
		t.Fatal("a peer of another user reached HTTP")
	default:
	}
}
