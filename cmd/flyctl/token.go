package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/spf13/pflag"
)

// tokenAbout is what flyctl token --help says the token is.
const tokenAbout = `flyd's loopback HTTP listener (for HTTP MCP clients and the dashboard)
needs a bearer token. It lives in ` + placeTokenFile + ` (yours alone) and changes only when
you rotate it: rotate when it may have leaked; every HTTP client then
needs the new one. flyctl mcp and flyctl itself use the socket and need
no token.`

// dashboardAbout is what flyctl dashboard --help says it does.
const dashboardAbout = `Prints the address of flyd's live dashboard (workspaces and sessions, runs
with their logs live, reload and stop buttons, upstream servers), with the
token in its fragment (#token=, which the browser never sends to a
server): the page keeps it in the tab's sessionStorage and drops it from
the address. No cookie is set: browsers send cookies to every port of a
host. --open opens it in your browser.`

func cmdTokenPrint(_ context.Context, c *call, _ *noFlags) error {
	if len(c.args) > 0 {
		return usagef("token needs one verb: print or rotate")
	}
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		return err
	}
	tok, err := readToken(p)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, tok)
	return nil
}

func cmdTokenRotate(ctx context.Context, c *call, _ *noFlags) error {
	if len(c.args) > 0 {
		return usagef("token needs one verb: print or rotate")
	}
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		return err
	}
	tok, err := localclient.New(p.Socket).RotateToken(ctx)
	if errors.Is(err, localclient.ErrNoDaemon) {
		// No flyd: write the file it will read at start.
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		tok = hex.EncodeToString(b)
		if err := writeFileAtomic(p.Token(), []byte(tok+"\n"), 0o600); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, tok)
	return nil
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

type dashboardOptions struct{ open bool }

func (o *dashboardOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.open, "open", false, "open it in the browser")
}

func cmdDashboard(_ context.Context, c *call, o *dashboardOptions) error {
	stdout, stderr := c.stdout, c.stderr
	p, err := paths.Resolve(c.getenv)
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
	if o.open {
		if err := browserCommand(u).Start(); err != nil {
			fmt.Fprintf(stderr, "flyctl: could not open a browser (%v): open the address above\n", err)
		}
	}
	return nil
}
