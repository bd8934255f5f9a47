//go:build unix

package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/endpoint"
	"github.com/fly-dev/fly/internal/owner"
)

// helperForOthers is a copy of the test binary that another user can
// run (the build's own lies in a directory of root's), in a directory
// open to everyone; the cleanup removes both.
func helperForOthers(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "flypeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Open to everyone, so that only the check under test stands in the way.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "helper")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestPeerCredRefused connects as another uid: flyd must drop the
// connection before any HTTP is spoken, and log the refusal. Only root
// can run a process as another user, so this runs where the tests run as
// root (as in CI); the socket directory check keeps other users out in
// practice anyway.
func TestPeerCredRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as another uid")
	}
	exe := helperForOthers(t)
	dir := filepath.Dir(exe)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o777)
	refused := make(chan endpoint.Peer, 1)
	pl := &endpoint.PeerListener{Listener: ln, User: owner.Current(), Refuse: func(p endpoint.Peer, err error) { refused <- p }}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") })}
	go hs.Serve(pl) // owned by the test: ended by hs.Close
	defer hs.Close()

	dial := func(uid uint32) string {
		cmd := exec.Command(exe)
		cmd.Env = []string{"FLY_TEST_HELPER=dial", "FLY_TEST_SOCKET=" + sock}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as uid %d: %v\n%s", uid, err, out)
		}
		return string(out)
	}
	if out := dial(65534); !strings.HasPrefix(out, "refused") || strings.Contains(out, "secret") {
		t.Errorf("uid 65534 got %q, want the connection refused", out)
	}
	select {
	case p := <-refused:
		if p.User != owner.UID(65534) || p.PID == 0 {
			t.Errorf("refused peer = %+v, want uid 65534 and its pid", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("refusal was not reported")
	}
	if out := dial(0); !strings.Contains(out, "secret") {
		t.Errorf("own uid got %q, want an answer", out)
	}
}

// asNobody is the test binary as a helper command that runs as uid 65534
// (the caller must be root).
func asNobody(t *testing.T) *exec.Cmd {
	cmd := exec.Command(helperForOthers(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}
