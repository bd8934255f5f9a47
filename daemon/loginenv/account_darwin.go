package loginenv

import (
	"context"
	"errors"
	"os/exec"
	"strings"
)

// account returns this process's user's login name, home directory and
// login shell from Directory Services (id and dscl), never from the
// environment: flyd's environment is whichever client's started it, and
// it must not choose the program a login environment is read from.
func account(ctx context.Context) (name, home, shell string, err error) {
	out, err := exec.CommandContext(ctx, "id", "-un").Output()
	if err != nil {
		return "", "", "", err
	}
	name = strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, "dscl", ".", "-read", "/Users/"+name, "NFSHomeDirectory", "UserShell").Output()
	if err != nil {
		return "", "", "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "NFSHomeDirectory: "); ok {
			home = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "UserShell: "); ok {
			shell = strings.TrimSpace(v)
		}
	}
	if home == "" || shell == "" {
		return "", "", "", errors.New("Directory Services gave no home directory or shell for " + name)
	}
	return name, home, shell, nil
}
