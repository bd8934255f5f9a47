//go:build unix

package paths

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckSocketTrust(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "good")
	os.Mkdir(good, 0o700)
	ln, err := net.Listen("unix", filepath.Join(good, "flyd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := CheckSocketTrust(filepath.Join(good, "flyd.sock")); err != nil {
		t.Errorf("own 0700 dir and socket: %v", err)
	}
	if err := CheckSocketTrust(filepath.Join(base, "missing", "flyd.sock")); err != nil {
		t.Errorf("missing dir: %v", err)
	}
	if err := CheckSocketTrust(filepath.Join(good, "missing.sock")); err != nil {
		t.Errorf("missing socket: %v", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if err := CheckSocketTrust(filepath.Join(open, "flyd.sock")); !errors.Is(err, ErrUntrusted) {
		t.Errorf("world-writable dir: %v, want ErrUntrusted", err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(good, link)
	if err := CheckSocketTrust(filepath.Join(link, "flyd.sock")); !errors.Is(err, ErrUntrusted) {
		t.Errorf("symlinked dir: %v, want ErrUntrusted", err)
	}
	plain := filepath.Join(good, "plain")
	os.WriteFile(plain, nil, 0o600)
	if err := CheckSocketTrust(plain); !errors.Is(err, ErrUntrusted) {
		t.Errorf("regular file as socket: %v, want ErrUntrusted", err)
	}
}

// TestCheckSocketTrustOtherUser needs root, to give a directory and a
// socket to another uid.
func TestCheckSocketTrustOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown to another uid")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "theirs")
	os.Mkdir(dir, 0o700)
	sock := filepath.Join(dir, "flyd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Lchown(sock, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := CheckSocketTrust(sock); !errors.Is(err, ErrUntrusted) {
		t.Errorf("socket of uid 4242: %v, want ErrUntrusted", err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := CheckSocketTrust(sock); !errors.Is(err, ErrUntrusted) {
		t.Errorf("directory of uid 4242: %v, want ErrUntrusted", err)
	}
}
