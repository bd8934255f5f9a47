package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// upstreamAbout is what flyctl upstream --help says upstreams are; the
// page lists the verbs after it.
const upstreamAbout = `Upstreams are your other MCP servers (dart mcp-server first), run by flyd
once and shared by every client: by default one process per workspace, so
five editors on one project share one Dart analysis server. Their tools
and prompts appear as NAME_<tool>; their resources keep their URIs.
flyd speaks MCP 2026-07-28 to a server that offers it, else the
handshake era (2025-11-25); --protocol 2025-11-25 keeps one in the
handshake era. list shows what each process speaks.

They live in ` + placeUpstreamsFile + `
(the mcpServers shape editors use; paste entries there if you like). flyd
picks up changes at once: an upstream whose entry changed is restarted,
the others are left alone. flyd never reads this from a project.`

type upstreamOptions struct {
	share, prefix string
	env           []string
	timeout       time.Duration
	protocol      string
	force, asJSON bool
	all           bool
}

func (o *upstreamOptions) flags(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVar(&o.share, "share", "", "add: workspace (default: one process per project), global (one for all) or session (one per client)")
	fs.StringVar(&o.prefix, "prefix", "", "add: the prefix of its tool and prompt names (default NAME; \"\" for none, if no name collides)")
	fs.StringArrayVar(&o.env, "env", nil, "add: an environment variable `K=V` for it (repeatable); it also gets the first client's environment")
	fs.DurationVar(&o.timeout, "timeout", 0, "add: how long one call may take (default 2m)")
	fs.StringVar(&o.protocol, "protocol", "", "add: the newest MCP revision to offer it, such as 2025-11-25 (default: the newest flyd speaks)")
	fs.BoolVar(&o.force, "force", false, "add: replace an entry of the same name")
	fs.BoolVar(&o.asJSON, "json", false, "list: print JSON")
	fs.BoolVar(&o.all, "all", false, "restart: every upstream")
}

// upstreamsFile is the user's upstreams.json, which every upstream verb
// needs to know.
func upstreamsFile(c *call) (string, error) {
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		return "", err
	}
	if p.Upstreams() == "" {
		return "", errors.New("cannot find your config directory: set HOME, XDG_CONFIG_HOME or " + paths.EnvConfigDir)
	}
	return p.Upstreams(), nil
}

func cmdUpstreamList(ctx context.Context, c *call, o *upstreamOptions) error {
	file, err := upstreamsFile(c)
	if err != nil {
		return err
	}
	if len(c.args) > 0 {
		return usagef("upstream list takes no arguments")
	}
	return upstreamList(ctx, *o, file, c.getenv, c.stdout)
}

func cmdUpstreamRemove(_ context.Context, c *call, _ *upstreamOptions) error {
	file, err := upstreamsFile(c)
	if err != nil {
		return err
	}
	if len(c.args) != 1 {
		return usagef("upstream remove takes one NAME")
	}
	name := c.args[0]
	return editUpstreams(file, func(f *mcpconfig.File) error {
		if !f.Remove(name) {
			return fmt.Errorf("no upstream named %q in %s (flyctl upstream list)", name, file)
		}
		fmt.Fprintf(c.stderr, "flyctl: removed %s from %s; flyd stops its processes\n", name, file)
		return nil
	})
}

func cmdUpstreamRestart(ctx context.Context, c *call, o *upstreamOptions) error {
	if _, err := upstreamsFile(c); err != nil {
		return err
	}
	name := "*"
	switch {
	case o.all && len(c.args) == 0:
	case !o.all && len(c.args) == 1:
		name = c.args[0]
	default:
		return usagef("upstream restart takes one NAME, or --all")
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	n, err := lc.RestartUpstream(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "restarted %d process(es)\n", n)
	return nil
}

func cmdUpstreamAdd(_ context.Context, c *call, o *upstreamOptions) error {
	file, err := upstreamsFile(c)
	if err != nil {
		return err
	}
	fs := c.flags
	if fs.NArg() < 2 || fs.ArgsLenAtDash() != 1 {
		return usagef("upstream add needs NAME -- COMMAND [ARGS...]")
	}
	srv := mcpconfig.Server{Name: fs.Arg(0), Command: fs.Arg(1), Args: fs.Args()[2:], Share: o.share, TimeoutSec: o.timeout.Seconds(), Protocol: o.protocol}
	if fs.Changed("prefix") {
		srv.Prefix = &o.prefix // "" exposes its names unprefixed
	}
	for _, kv := range o.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--env %q: want K=V", kv)
		}
		if srv.Env == nil {
			srv.Env = map[string]string{}
		}
		srv.Env[k] = v
	}
	return editUpstreams(file, func(f *mcpconfig.File) error {
		if _, ok := f.Server(srv.Name); ok && !o.force {
			return fmt.Errorf("%s already has an upstream named %q; pass --force to replace it", file, srv.Name)
		}
		f.Put(srv)
		fmt.Fprintf(c.stderr, "flyctl: added %s to %s; its tools appear as %s_<tool> in every client\n", srv.Name, file, srv.ToolPrefix())
		return nil
	})
}

// editUpstreams applies edit to the upstreams file and writes it back
// (0600, its directory 0700: on Windows a directory flyctl makes is the
// user's alone, and the file takes its access list), refusing a result
// flyd would refuse.
func editUpstreams(file string, edit func(*mcpconfig.File) error) error {
	f, err := mcpconfig.ReadFile(file)
	if err != nil {
		return err
	}
	if err := edit(f); err != nil {
		return err
	}
	if _, err := mcpconfig.Upstreams(f); err != nil {
		return fmt.Errorf("not written: %w", err)
	}
	if err := owner.MkdirPrivate(filepath.Dir(file)); err != nil {
		return err
	}
	return mcpconfig.WriteFile(file, f, 0o600)
}

func upstreamList(ctx context.Context, o upstreamOptions, file string, getenv func(string) string, stdout io.Writer) error {
	f, err := mcpconfig.ReadFile(file)
	if err != nil {
		return err
	}
	var st *wire.Status
	if lc, err := newClient(getenv); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, _ = lc.Status(cctx)
		cancel()
	}
	running := st != nil
	if !running {
		st = &wire.Status{}
	}
	if o.asJSON {
		type entry struct {
			Name      string           `json:"name"`
			Config    mcpconfig.Server `json:"config"`
			Processes []wire.Upstream  `json:"processes"`
		}
		out := struct {
			File      string  `json:"file"`
			Upstreams []entry `json:"upstreams"`
		}{File: file, Upstreams: []entry{}}
		for _, s := range f.Servers {
			e := entry{Name: s.Name, Config: s, Processes: []wire.Upstream{}}
			for _, u := range st.Upstreams {
				if u.Name == s.Name {
					e.Processes = append(e.Processes, u)
				}
			}
			out.Upstreams = append(out.Upstreams, e)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		return writeIndentedJSON(stdout, b)
	}
	if len(f.Servers) == 0 {
		fmt.Fprintf(stdout, "no upstreams in %s; add one with: flyctl upstream add dart -- dart mcp-server\n", file)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tSHARE\tCOMMAND\n")
	for _, s := range f.Servers {
		share := s.SharedAs()
		if s.Disabled {
			share += " (disabled)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, share, strings.Join(append([]string{s.Command}, s.Args...), " "))
	}
	if running && len(st.Upstreams) > 0 {
		fmt.Fprintf(tw, "\nUPSTREAM\tSTATE\tPID\tPROTOCOL\tSESSIONS\tRESTARTS\tRSS\tWORKSPACE\n")
		writeUpstreams(tw, st.Upstreams)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if running {
		writeUpstreamErrors(stdout, st.Upstreams)
	}
	return nil
}

// writeUpstreamErrors says, under the table, why each upstream that is
// not running is not, with the stderr lines flyd quotes.
func writeUpstreamErrors(w io.Writer, ups []wire.Upstream) {
	for _, u := range ups {
		if u.Error == "" || u.State == "running" {
			continue
		}
		fmt.Fprintf(w, "\nupstream %s is %s: %s\n", safetext.Field(u.Name), u.State, strings.ReplaceAll(safetext.Lines(u.Error), "\n", "\n    "))
	}
}

// writeUpstreams writes one row per upstream process.
func writeUpstreams(tw io.Writer, ups []wire.Upstream) {
	for _, u := range ups {
		pid, rss, ws, protocol := "-", "-", u.Workspace, u.Protocol
		if u.PID > 0 {
			pid = strconv.Itoa(u.PID)
		}
		if u.RSSBytes > 0 {
			rss = humanBytes(u.RSSBytes)
		}
		if ws == "" {
			ws = "(" + u.Share + ")"
		}
		if protocol == "" {
			protocol = "-"
		}
		row(tw, u.Name, u.State, pid, protocol, strconv.Itoa(u.Sessions), strconv.Itoa(u.Restarts), rss, ws)
	}
}
