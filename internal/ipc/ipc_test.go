package ipc

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
)

// endpoint is an endpoint name of the test's own: a short socket path,
// or on Windows the pipe that path names.
func endpoint(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := paths.Resolve(func(k string) string {
		return map[string]string{paths.EnvSocket: filepath.Join(dir, "s"), paths.EnvStateDir: dir}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.Socket
}

// Clients connect, each is accepted with its peer (this process, this
// user), bytes go both ways, and deadlines hold.
func TestListenDial(t *testing.T) {
	name := endpoint(t)
	ln, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	const clients = 8
	var served sync.WaitGroup
	served.Go(func() { // owned by the test: ends when Accept fails after Close
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p, err := PeerOf(c)
			if err != nil || p.User != owner.Current() || (p.PID != 0 && p.PID != os.Getpid()) {
				t.Errorf("PeerOf(a client of this process) = %+v, %v; want this user and pid %d", p, err, os.Getpid())
			}
			served.Go(func() { // owned by the test: ends with its client
				defer c.Close()
				io.Copy(c, c)
			})
		}
	})
	var dialers sync.WaitGroup
	for i := range clients {
		dialers.Go(func() { // owned by the test: waited for below
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Dial(ctx, name)
			if err != nil {
				t.Errorf("client %d: Dial = %v", i, err)
				return
			}
			defer c.Close()
			msg := []byte("hello from a client")
			if _, err := c.Write(msg); err != nil {
				t.Errorf("client %d: write: %v", i, err)
				return
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
				t.Errorf("client %d: echo = %q, %v", i, got, err)
			}
			// Nothing more comes: a read deadline ends the wait.
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, err = c.Read(got)
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("client %d: read past its deadline = %v, want os.ErrDeadlineExceeded", i, err)
			}
			// As a net.Error that times out, which net/http asserts (not
			// errors.As) to tell its own deadline from a dead connection.
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Errorf("client %d: read past its deadline = %#v, want a net.Error that times out", i, err)
			}
		})
	}
	dialers.Wait()
	// Close ends a pending Accept.
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	served.Wait()
}

// A dial where nobody listens says so.
func TestDialNobody(t *testing.T) {
	_, err := Dial(context.Background(), endpoint(t))
	if err == nil || !NoListener(err) {
		t.Errorf("Dial(no listener) = %v, want NoListener", err)
	}
}
