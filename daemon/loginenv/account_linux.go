package loginenv

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// account returns this process's user's login name, home directory and
// login shell from the user database (/etc/passwd, else getent for users
// of a network directory), never from the environment: flyd's
// environment is whichever client's started it, and it must not choose
// the program a login environment is read from.
func account(ctx context.Context) (name, home, shell string, err error) {
	uid := strconv.Itoa(os.Getuid())
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		if n, h, s, ok := passwdEntry(io.LimitReader(f, MaxBytes), uid); ok {
			return n, h, s, nil
		}
	}
	out, err := exec.CommandContext(ctx, "getent", "passwd", uid).Output()
	if err == nil {
		if n, h, s, ok := passwdEntry(strings.NewReader(string(out)), uid); ok {
			return n, h, s, nil
		}
	}
	return "", "", "", errors.New("this user is in neither /etc/passwd nor getent passwd")
}

// passwdEntry finds uid's line in passwd(5) text.
func passwdEntry(r io.Reader, uid string) (name, home, shell string, ok bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) == 7 && f[2] == uid {
			return f[0], f[5], f[6], true
		}
	}
	return "", "", "", false
}
