package paths

import (
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/owner"
)

// flyd's endpoint on Windows is a pipe: the user's by default, named by
// their SID; a FLY_SOCKET path names a pipe of its own, the same for the
// same path whatever its case, another for another path.
func TestWindowsPipeNames(t *testing.T) {
	p, err := Resolve(env(map[string]string{"LOCALAPPDATA": `C:\Users\u\AppData\Local`}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `\\.\pipe\fly-` + owner.Current().String(); p.Socket != want || p.StateDir != `C:\Users\u\AppData\Local\fly` {
		t.Errorf("Resolve(defaults) = %+v, want the pipe %s", p, want)
	}
	name := func(sock string) string {
		t.Helper()
		p, err := Resolve(env(map[string]string{"LOCALAPPDATA": `C:\l`, EnvSocket: sock}))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSocketPath(p.Socket); err != nil {
			t.Errorf("CheckSocketPath(%s) = %v", p.Socket, err)
		}
		return p.Socket
	}
	a, upper, b := name(`C:\t\one\flyd.sock`), name(`C:\T\ONE\flyd.sock`), name(`C:\t\two\flyd.sock`)
	if !strings.HasPrefix(a, `\\.\pipe\fly-`) || a != upper || a == b {
		t.Errorf("pipes of FLY_SOCKET paths: %s, %s (same path, other case), %s (another path)", a, upper, b)
	}
	if got := name(`\\.\pipe\mine`); got != `\\.\pipe\mine` {
		t.Errorf("FLY_SOCKET naming a pipe = %s", got)
	}
	if err := CheckSocketPath(`C:\x\flyd.sock`); err == nil || !strings.Contains(err.Error(), EnvSocket) {
		t.Errorf("CheckSocketPath(a path) = %v, want a hint", err)
	}
}
