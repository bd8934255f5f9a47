package loginenv

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sys/windows"
)

// read asks Windows for the user's environment block, as Explorer gives
// it to programs at logon: the system's and the user's variables from the
// registry, not this process's.
func read(_ context.Context, _ string, _ func(string) string) (Env, error) {
	var tok windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_QUERY|windows.TOKEN_DUPLICATE, &tok); err != nil {
		return Env{}, fmt.Errorf("read your Windows user environment: %w", err)
	}
	defer tok.Close()
	env, err := tok.Environ(false)
	if err != nil {
		return Env{}, fmt.Errorf("read your Windows user environment: %w", err)
	}
	vars := parse([]byte(strings.Join(env, "\x00")))
	if len(vars) == 0 {
		return Env{}, fmt.Errorf("read your Windows user environment: %w", errNoVars)
	}
	return Env{Vars: vars, Source: "your Windows user environment"}, nil
}

// fold: Windows compares variable names without regard to case.
func fold(k string) string { return strings.ToUpper(k) }

// extraNameRune: Windows names may hold more than a C identifier, such as
// "ProgramFiles(x86)" and "CommonProgramFiles(x86)".
func extraNameRune(c rune) bool { return c == '(' || c == ')' || c == '.' || c == '-' }
