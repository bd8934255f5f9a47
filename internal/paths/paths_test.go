package paths

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("defaults below are Linux's")
	}
	uid := strconv.Itoa(os.Getuid())
	fallbackSock := filepath.Join("/tmp", "fly-"+uid, "flyd.sock")
	if fi, err := os.Stat("/run/user/" + uid); err == nil && fi.IsDir() {
		fallbackSock = filepath.Join("/run/user", uid, "fly", "flyd.sock")
	}
	cases := []struct {
		env           map[string]string
		state, socket string
	}{
		{map[string]string{"HOME": "/h"}, "/h/.local/state/fly", fallbackSock},
		{map[string]string{"HOME": "/h", "TMPDIR": "/var/tmp/x"}, "/h/.local/state/fly", fallbackSock},
		{map[string]string{"HOME": "/h", "XDG_STATE_HOME": "/xs", "XDG_RUNTIME_DIR": "/run/user/7"}, "/xs/fly", "/run/user/7/fly/flyd.sock"},
		{map[string]string{"HOME": "/h", "XDG_STATE_HOME": "relative"}, "/h/.local/state/fly", fallbackSock},
		{map[string]string{"FLY_STATE_DIR": "/s", "FLY_SOCKET": "/r/f.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, "/s", "/r/f.sock"},
	}
	for _, c := range cases {
		p, err := Resolve(env(c.env))
		if err != nil || p.StateDir != c.state || p.Socket != c.socket {
			t.Errorf("Resolve(%v) = %+v, %v; want state %s socket %s", c.env, p, err, c.state, c.socket)
		}
	}
	if _, err := Resolve(env(nil)); err == nil || !strings.Contains(err.Error(), "FLY_STATE_DIR") {
		t.Errorf("Resolve(empty env) error = %v, want a hint to set FLY_STATE_DIR", err)
	}
}
