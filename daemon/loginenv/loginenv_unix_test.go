//go:build unix

package loginenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var getenvOS = os.Getenv

// The shell comes from the user database, not from $SHELL: flyd's
// environment is whichever client's started it.
func TestAccountNotEnv(t *testing.T) {
	_, home, sh, err := account(context.Background())
	if err != nil {
		t.Skipf("no account for this uid here: %v", err)
	}
	if home == "" || !filepath.IsAbs(sh) {
		t.Errorf("account = home %q shell %q", home, sh)
	}
	t.Setenv("SHELL", "/nonexistent/evil-shell")
	env, err := Read(context.Background(), "", os.Getenv)
	if err == nil && strings.Contains(env.Source, "evil") {
		t.Errorf("Read took $SHELL: %s", env.Source)
	}
}

// shell writes a fake login shell that runs body before doing what a
// shell does with -c.
func shell(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fakesh")
	// The fake is called as: fakesh -i -l -c SCRIPT NAME MARKER.
	script := "#!/bin/sh\n" + body + "\nshift 3\nscript=\"$1\"; shift\nexec /bin/sh -c \"$script\" \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// What rc files print around the environment is not taken for it.
func TestReadNoisyShell(t *testing.T) {
	sh := shell(t, `echo "Welcome, traveller"; export JAVA_HOME=/opt/jdk; export ODD='a b
c'`)
	env, err := Read(context.Background(), sh, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if env.Vars["JAVA_HOME"] != "/opt/jdk" || env.Vars["ODD"] != "a b\nc" || !strings.Contains(env.Source, "fakesh") {
		t.Errorf("Read = %q from %q", env.Vars, env.Source)
	}
	for k := range env.Vars {
		if strings.Contains(k, "Welcome") {
			t.Errorf("the banner became a variable: %q", k)
		}
	}
}

// A shell that hangs costs at most the timeout, and what it started is
// gone with it.
func TestReadHangingShell(t *testing.T) {
	sh := shell(t, `sleep 100`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Read(ctx, sh, os.Getenv); err == nil {
		t.Fatal("Read of a hanging shell succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Read took %v, want about the 300 ms it was given", d)
	}
}

// A shell that prints without end is cut at MaxBytes and found wanting.
func TestReadFloodingShell(t *testing.T) {
	sh := shell(t, `head -c 3000000 /dev/zero | tr '\0' x`)
	if _, err := Read(context.Background(), sh, os.Getenv); err == nil {
		t.Fatal("Read of a flood succeeded")
	}
}
