package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"crypto/rand"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const tokenUsage = `Usage:
  flyctl token print
  flyctl token rotate

flyd's loopback HTTP listener (for HTTP MCP clients and the dashboard)
needs a bearer token. It lives in %s (mode 0600) and changes only when
you rotate it: rotate when it may have leaked; every HTTP client then
needs the new one. flyctl mcp and flyctl itself use the socket and need
no token.

Examples:
  flyctl token print
  curl -H "Authorization: Bearer $(flyctl token print)" "http://$(cat %s)/v1/status"
`

const dashboardUsage = `Usage:
  flyctl dashboard [--open]

Prints the address of flyd's live dashboard (workspaces and sessions, runs
with their logs live, reload and stop buttons, upstream servers), with the
token in its fragment (#token=, which the browser never sends to a
server): the page keeps it in the tab's sessionStorage and drops it from
the address. No cookie is set: browsers send cookies to every port of a
host. --open opens it in your browser.

Flags:
%s
Examples:
  flyctl dashboard --open
`

func runToken(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("token needs one verb: print or rotate")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, tokenUsage, p.Token(), p.HTTPAddr())
		return nil
	case "print":
		tok, err := readToken(p)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, tok)
		return nil
	case "rotate":
		c, err := newClient(getenv)
		if err != nil {
			return err
		}
		var res struct {
			Token string `json:"token"`
		}
		err = c.callJSON(ctx, http.MethodPost, wire.RouteTokenRotate, nil, &res)
		if errors.Is(err, errNoDaemon) {
			// No flyd: write the file it will read at start.
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			res.Token = hex.EncodeToString(b)
			if err := writeFileAtomic(p.Token(), []byte(res.Token+"\n"), 0o600); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res.Token)
		return nil
	}
	return usagef("unknown token verb %q: print or rotate", args[0])
}

func readToken(p paths.Paths) (string, error) {
	b, err := os.ReadFile(p.Token())
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no token in %s: flyd makes one when it starts with its loopback listener (flyd run --listen)", p.Token())
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// listenAddr is where flyd's loopback listener is, as flyd wrote it.
func listenAddr(p paths.Paths) (string, error) {
	b, err := os.ReadFile(p.HTTPAddr())
	if err != nil {
		return "", fmt.Errorf("flyd has no loopback listener (%v); is it running? try: flyctl status", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func runDashboard(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl dashboard", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	open := fs.Bool("open", false, "open it in the browser")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, dashboardUsage, fs.FlagUsages())
			return nil
		}
		return usagef("dashboard: %v", err)
	}
	p, err := paths.Resolve(getenv)
	if err != nil {
		return err
	}
	addr, err := listenAddr(p)
	if err != nil {
		return err
	}
	tok, err := readToken(p)
	if err != nil {
		return err
	}
	u := "http://" + addr + "/#token=" + tok
	fmt.Fprintln(stdout, u)
	if *open {
		opener := "xdg-open"
		if runtime.GOOS == "darwin" {
			opener = "open"
		}
		if err := exec.Command(opener, u).Start(); err != nil {
			fmt.Fprintf(stderr, "flyctl: could not open a browser (%v): open the address above\n", err)
		}
	}
	return nil
}
