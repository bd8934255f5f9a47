// Package loginenv reads the environment that a user's login gives
// programs, for the runs of a client that handed flyd less than that.
// Editors and agents pass their MCP servers very different environments
// (Codex passes seven variables; the TypeScript SDK's stdio transport
// six), and a flutter build without JAVA_HOME, ANDROID_HOME or the
// proxies fails for reasons the agent cannot see. Editors themselves
// resolve a login shell's environment at start (VS Code runs `$SHELL -il`)
// for the same reason; this package does that once for flyd: on Unix the
// variables an interactive login shell exports, on Windows the user's
// environment block (the registry's, as Explorer gives it at logon).
//
// What it reads is bounded in time, bytes and count, and comes from the
// user's own shell files: it is the user's, not a client's. It owns
// reading the environment, not which variables a run gets (daemon/runs).
package loginenv

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
)

// Bounds on what a login environment may be.
const (
	// Timeout bounds a login shell: an rc file that waits on something
	// must not hold a run.
	Timeout = 5 * time.Second
	// MaxBytes bounds what the shell may print.
	MaxBytes = 1 << 20
	// MaxVars bounds the variables kept.
	MaxVars = 4096
)

// Env is a login environment and where it came from.
type Env struct {
	Vars   map[string]string
	Source string // for the run's log: "the login shell /bin/zsh -il", "your Windows user environment"
}

// Read reads the user's login environment. On Unix the shell is the
// user's login shell from the user database (never $SHELL: flyd's
// environment is whichever client's started it), unless shell names one
// (flyd run --login-shell); getenv gives only LANG. It never takes longer
// than Timeout.
func Read(ctx context.Context, shell string, getenv func(string) string) (Env, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return read(ctx, shell, getenv)
}

// errNoVars is Read's error when the login gave nothing usable.
var errNoVars = errors.New("the login environment is empty")

// parse turns NUL-separated NAME=value records into a map, keeping at
// most MaxVars well-formed ones.
func parse(b []byte) map[string]string {
	vars := make(map[string]string)
	for _, rec := range strings.Split(string(b), "\x00") {
		k, v, ok := strings.Cut(rec, "=")
		if !ok || !validName(k) || strings.ContainsRune(v, 0) {
			continue
		}
		if len(vars) >= MaxVars {
			break
		}
		vars[k] = v
	}
	return vars
}

// validName reports whether k can name a variable: a C identifier, as
// POSIX shells export them (Windows allows more, but not = or NUL,
// which parse already splits on).
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && (i == 0 || !(c >= '0' && c <= '9')) && !extraNameRune(c) {
			return false
		}
	}
	return true
}

// Fill adds to env the variables of login that env lacks, never changing
// one env has, and leaves out those that describe a shell rather than a
// user (PWD, SHLVL …). (fly's own, FLY_SOCKET and the like, the runs
// engine leaves out of every child's environment.) It returns the names it added,
// sorted. Names compare as the OS compares them (sameName).
func Fill(env map[string]string, login map[string]string) (added []string) {
	have := make(map[string]bool, len(env))
	for k := range env {
		have[fold(k)] = true
	}
	for k, v := range login {
		if have[fold(k)] || skip(k) {
			continue
		}
		env[k] = v
		added = append(added, k)
	}
	sort.Strings(added)
	return added
}

// skip reports whether a login shell's variable k says something of
// that shell rather than of the user.
func skip(k string) bool {
	switch k {
	case "PWD", "OLDPWD", "SHLVL", "_", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLUMNS", "LINES", "PS1", "PS2", "PROMPT":
		return true
	}
	return false
}
