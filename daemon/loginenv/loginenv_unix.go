//go:build unix

package loginenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// marker brackets the environment in the shell's output: rc files may
// print (a banner, a warning) before and after.
const marker = "--fly-login-env-4c1e9b--"

// read runs the user's login shell (from the user database, or the one
// given) as login(1) would, with the user's name and home from the user
// database.
func read(ctx context.Context, given string, getenv func(string) string) (Env, error) {
	name, home, shell, err := account(ctx)
	if err != nil {
		return Env{}, fmt.Errorf("read the login environment: %w", err)
	}
	if given != "" {
		shell = given
	}
	if !filepath.IsAbs(shell) {
		shell = "/bin/sh"
	}
	return readShell(ctx, shell, []string{"HOME=" + home, "USER=" + name, "LOGNAME=" + name, "SHELL=" + shell, "LANG=" + getenv("LANG")})
}

// readShell runs shell as an interactive login shell with the
// environment login(1) would give it (env, and a default PATH), detached
// from any terminal, and has it print its environment between markers.
func readShell(ctx context.Context, shell string, env []string) (Env, error) {
	script := `printf '%s' "$1"; env -0; printf '%s' "$1"`
	cmd := exec.CommandContext(ctx, shell, "-i", "-l", "-c", script, "fly-login-env", marker)
	cmd.Stdin = nil // /dev/null: an rc file that reads gets EOF
	// What login(1) gives a shell, not flyd's environment: flyd's came
	// from whichever client started it, and the login's must be the
	// user's alone.
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	var out bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: MaxBytes}
	cmd.Stderr = io.Discard
	// A session of its own: no controlling terminal for an interactive
	// shell to take over, and the timeout's kill reaches its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil && ctx.Err() != nil {
		return Env{}, fmt.Errorf("read the login environment (%s -il): %w", shell, ctx.Err())
	} else if err != nil && out.Len() == 0 {
		return Env{}, fmt.Errorf("read the login environment (%s -il): %w", shell, err)
	}
	b := out.Bytes()
	start := bytes.Index(b, []byte(marker))
	end := bytes.LastIndex(b, []byte(marker))
	if start < 0 || end <= start {
		return Env{}, fmt.Errorf("read the login environment (%s -il): %w", shell, errNoVars)
	}
	vars := parse(b[start+len(marker) : end])
	if len(vars) == 0 {
		return Env{}, fmt.Errorf("read the login environment (%s -il): %w", shell, errNoVars)
	}
	return Env{Vars: vars, Source: "the login shell " + shell + " -il"}, nil
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	if k > 0 {
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

func fold(k string) string      { return k }
func extraNameRune(c rune) bool { return false }
