package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/spf13/pflag"
)

// uninstallAbout is what flyctl uninstall --help says it does.
const uninstallAbout = `Undoes flyctl setup: it removes the "fly" server from every MCP client's
user configuration (see flyctl setup --help for where each keeps it), and
the login service (flyctl service uninstall, which stops flyd); then,
once you confirm (or with --purge), the state directory: flyd's database,
logs and token.

Only a server named "fly" that runs flyctl mcp is removed; a "fly" that is
something else (and fly.io's "flyctl" entries) is left alone, as is
everything else in those files: other servers, other keys, comments and
indentation. A client's own command removes it where the client has one
(claude mcp remove --scope user fly, codex mcp remove fly, gemini mcp
remove --scope user fly); otherwise the file is edited in place,
atomically.

With --client, only those clients' entries are removed; the service and
the state directory stay. flyd's upstreams (` + placeUpstreamsFile + `)
are kept, and so are the flyctl and flyd binaries: remove those as you
installed them. --dry-run shows all of this without changing anything.`

type uninstallOptions struct {
	clients []string
	purge   bool
	dryRun  bool
}

func (o *uninstallOptions) flags(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringArrayVar(&o.clients, "client", nil, "only this `CLIENT`'s entry (repeatable): "+userClientNames())
	fs.BoolVar(&o.purge, "purge", false, "also remove the state directory, without asking")
	fs.BoolVar(&o.dryRun, "dry-run", false, "show what uninstall would do; change nothing")
}

func cmdUninstall(ctx context.Context, c *call, o *uninstallOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	clients, err := pickClients("uninstall", o.clients)
	if err != nil {
		return err
	}
	if len(o.clients) > 0 && o.purge {
		return usagef("uninstall: --purge removes the state directory, which --client keeps: use one of them")
	}
	h := c.machine()
	r := &report{w: c.stdout, dryRun: o.dryRun}
	fmt.Fprintln(r.w, "flyctl uninstall")
	if o.dryRun {
		fmt.Fprintln(r.w, "dry run: nothing is changed")
	}

	r.section(`MCP clients (user scope, server "fly"):`)
	for _, uc := range clients {
		uninstallClient(ctx, c, h, r, uc.inspect(c.getenv), o.dryRun)
	}
	if len(o.clients) == 0 {
		r.section("flyd service:")
		uninstallService(ctx, c, r, o.dryRun)
		r.section("state:")
		uninstallState(ctx, c, h, r, o)
	}

	switch {
	case r.failed > 0:
		fmt.Fprintf(r.w, "\n%d step(s) failed; see above.\n", r.failed)
	case o.dryRun && r.changed > 0:
		fmt.Fprintf(r.w, "\nDry run: nothing was changed; flyctl uninstall without --dry-run makes these %d change(s).\n", r.changed)
	case r.changed == 0:
		fmt.Fprintln(r.w, "\nNothing to remove.")
	default:
		fmt.Fprintf(r.w, "\nDone: %d change(s).\n", r.changed)
	}
	if len(o.clients) == 0 {
		if up, err := upstreamsFile(c); err == nil {
			fmt.Fprintf(r.w, "Kept: %s (your shared upstreams; if setup moved a client's dart mcp-server into it, add that back to the client), and the flyctl and flyd binaries.\n", up)
		}
	}
	if r.failed > 0 {
		return fmt.Errorf("uninstall: %d step(s) failed", r.failed)
	}
	return nil
}

// uninstallClient removes the client's "fly" server when it is flyctl's.
func uninstallClient(ctx context.Context, c *call, h *host, r *report, st *clientState, dryRun bool) {
	uc := st.uc
	switch {
	case st.err != nil && (st.present || st.exists):
		r.fail(uc.name, st.err)
		return
	case !st.exists:
		r.line(uc.name, "none", "")
		return
	}
	s, ok := st.servers[serverName]
	if !ok {
		r.line(uc.name, "none", "no "+quoteJSON(serverName)+" in "+st.file)
		return
	}
	if _, ours := flyctlEntry(s); !ours {
		r.line(uc.name, "left alone", fmt.Sprintf("%q in %s is not flyctl mcp (%s)", serverName, st.file, strings.Join(append([]string{s.Command}, s.Args...), " ")))
		return
	}
	if dryRun {
		how := "edit " + st.file
		if st.cli != "" && uc.removeArgv != nil {
			if argv := uc.removeArgv(st.cli, serverName); cliRunnable(st.cli, argv[1:]) {
				how = showArgv(argv)
			}
		}
		r.did(uc.name, "", "would remove", how)
		return
	}
	how, err := st.removeServer(ctx, h, c.getenv, serverName)
	if err != nil {
		r.fail(uc.name, err)
		return
	}
	r.did(uc.name, "removed", "", how)
}

// uninstallService stops flyd and removes the login service, with
// flyctl service uninstall's code.
func uninstallService(ctx context.Context, c *call, r *report, dryRun bool) {
	svc := c.svc()
	st, err := serviceState(ctx, svc)
	switch {
	case err != nil:
		r.line("service", "skipped", err.Error())
		return
	case !st.Installed:
		r.line("service", "none", "not installed ("+st.Unit+")")
		return
	case dryRun && st.Packaged:
		r.did("service", "", "would disable", "stop flyd and disable the package's "+st.Unit+" (the package keeps the file)")
		return
	case dryRun:
		r.did("service", "", "would remove", "stop flyd and remove "+st.Unit)
		return
	}
	sc := *svc
	var out, warn bytes.Buffer
	sc.stdout, sc.stderr = &out, &warn
	if err := sc.uninstall(ctx, nil, nil); err != nil {
		r.fail("service", err)
		return
	}
	r.did("service", "removed", "", strings.TrimSpace(out.String()))
}

// uninstallState removes the state directory, once the user confirms (or
// with --purge), after stopping a flyd that still runs from it.
func uninstallState(ctx context.Context, c *call, h *host, r *report, o *uninstallOptions) {
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		r.fail("state", err)
		return
	}
	dir := p.StateDir
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.line("state", "none", "no "+dir)
		return
	case err != nil:
		r.fail("state", err)
		return
	}
	if err := paths.CheckRoot(dir, userHome(c.getenv)); err != nil {
		r.fail("state", fmt.Errorf("the state directory %s is not fly's alone: %w; remove fly's files from it by hand", dir, err))
		return
	}
	fly := len(entries) == 0
	for _, e := range entries {
		if slices.Contains(paths.StateMarks, e.Name()) {
			fly = true
		}
	}
	if !fly {
		r.line("state", "left alone", dir+" holds neither of fly's "+strings.Join(paths.StateMarks, " and ")+": it is not fly's state directory")
		return
	}
	switch {
	case o.purge:
	case o.dryRun:
		r.did("state", "", "would ask", "to remove "+dir+" (flyd's database, logs and token); --purge removes it without asking")
		return
	case h.interactive():
		fmt.Fprintf(r.w, "  Remove %s (flyd's database, logs and token)? [y/N] ", dir)
		line, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			r.line("state", "kept", dir+"; flyctl uninstall --purge removes it")
			return
		}
	default:
		r.line("state", "kept", dir+" (not asked: no terminal); flyctl uninstall --purge removes it")
		return
	}
	if o.dryRun {
		r.did("state", "", "would remove", dir)
		return
	}
	if err := stopFlyd(ctx, p.Socket); err != nil {
		r.fail("state", fmt.Errorf("%w; %s is kept", err, dir))
		return
	}
	kept, err := removeState(dir)
	if err != nil {
		r.fail("state", err)
		return
	}
	if len(kept) > 0 {
		r.did("state", "removed", "", "fly's files in "+dir+"; kept what is not fly's: "+strings.Join(kept, ", "))
		return
	}
	r.did("state", "removed", "", dir)
}

// removeState removes fly's entries of the state directory dir (and dir,
// once empty), never anything else: a FLY_STATE_DIR set by mistake to a
// directory of the user's loses only files fly made. It returns the names
// it kept.
func removeState(dir string) (kept []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		ours := false
		for _, pat := range paths.StateEntries {
			if ok, _ := path.Match(pat, e.Name()); ok {
				ours = true
			}
		}
		if !ours {
			kept = append(kept, e.Name())
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return kept, err
		}
	}
	if len(kept) == 0 {
		return nil, os.Remove(dir)
	}
	return kept, nil
}

// stopFlyd asks a flyd that answers on socket to stop, and waits until it
// no longer answers: its state directory can then be removed.
func stopFlyd(ctx context.Context, socket string) error {
	lc := localclient.New(socket)
	defer lc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, serviceReadyTimeout)
	defer cancel()
	pid, err := lc.Ping(ctx)
	if err != nil {
		return nil // none answers
	}
	if _, err := lc.Shutdown(ctx); err != nil {
		return fmt.Errorf("ask flyd (pid %d) to stop: %w", pid, err)
	}
	for {
		if _, err := lc.Ping(ctx); err != nil && ctx.Err() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flyd (pid %d) did not stop within %s", pid, serviceReadyTimeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
