package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// statusAbout is what flyctl status --help says it does.
const statusAbout = `Shows the daemon's version, pid, uptime, socket, state directory and the
size of its database, then its workspaces, its MCP sessions (client,
peer pid, workspace), its live runs and its shared upstream MCP servers.
A live run's ERRORS are the app's framework errors: how many distinct
ones since its last hot reload or restart, then, when it differs, how
many times it reported any in all ("2 (17×)"; flyctl errors RUN lists
them); CLAIMED BY is the client holding it (its reloads and stops are
refused to others until then). --json prints flyd's status document as
is; its fields may grow but never change meaning.

Exits 1 when flyd is not running.`

type statusOptions struct{ json bool }

func (o *statusOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the daemon's status as JSON")
}

func cmdStatus(ctx context.Context, c *call, o *statusOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	if o.json {
		raw, err := lc.StatusJSON(ctx)
		if err != nil {
			return err
		}
		return writeIndentedJSON(c.stdout, raw)
	}
	st, err := lc.Status(ctx)
	if err != nil {
		return err
	}
	return writeStatus(c.stdout, st)
}

// writeStatus writes flyd's status for people.
func writeStatus(stdout io.Writer, st *wire.Status) error {
	fmt.Fprintf(stdout, "flyd %s (protocol %d), pid %d, up %s\n", st.Version, st.Protocol, st.PID, time.Duration(st.UptimeSec*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(stdout, "socket:    %s\nstate dir: %s\ndatabase:  %s (%s)\n", st.Socket, st.StateDir, paths.Paths{StateDir: st.StateDir}.DB(), humanBytes(st.DBBytes))
	if gc := st.GrepCache; gc.Limit > 0 {
		fmt.Fprintf(stdout, "cache:     %s of %s (file contents kept in memory for files_grep; flyd run --grep-cache-mb)\n", humanBytes(gc.Bytes), humanBytes(gc.Limit))
	} else {
		fmt.Fprintf(stdout, "cache:     off (flyd run --grep-cache-mb 0): files_grep reads from disk\n")
	}
	if st.HTTP != "" {
		fmt.Fprintf(stdout, "http:      http://%s (MCP at /mcp, dashboard at /; flyctl dashboard, flyctl token print)\n", st.HTTP)
	}
	for _, n := range st.Notices {
		fmt.Fprintf(stdout, "NOTICE:    %s\n", safetext.Line(n))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nWORKSPACE\tFILES\tSESSIONS\tGREP CACHE\n")
	for _, w := range st.Workspaces {
		row(tw, w.Root, strconv.Itoa(w.Files), strconv.Itoa(w.Sessions), humanBytes(int64(w.CacheBytes)))
	}
	fmt.Fprintf(tw, "\nSESSION\tCLIENT\tPEER PID\tFILES READ\tTOOLS CALLED\tWORKSPACE\n")
	for _, s := range st.Sessions {
		client := strings.TrimSpace(s.ClientName + " " + s.ClientVersion)
		if client == "" {
			client = "-"
		}
		pid := "-"
		if s.PeerPID > 0 {
			pid = strconv.Itoa(s.PeerPID)
		}
		row(tw, s.ID, client, pid, strconv.FormatInt(s.FilesRead, 10), strconv.FormatInt(s.ToolsCalled, 10), s.Workspace)
	}
	fmt.Fprintf(tw, "\nLIVE RUN\tKIND\tSTATE\tPID\tERRORS\tCLAIMED BY\tSTARTED\tROOT\n")
	now, tty := time.Now(), isTerminal(stdout)
	for _, r := range st.Runs {
		pid := "-"
		if r.PID > 0 {
			pid = strconv.Itoa(r.PID)
		}
		claim := "-"
		if r.Claim != nil {
			claim = r.Claim.By.Client + " until " + r.Claim.Until.Local().Format("15:04")
		}
		row(tw, r.RunID, r.Kind, r.State, pid, errorCount(r.Errors), claim, startedAt(r.StartedAt, now, tty), r.Root)
	}
	if note := errorsNote(st.Runs); note != "" {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, note)
	}
	if len(st.Apps) > 0 {
		fmt.Fprintf(tw, "\nEXTERNAL APP\tNAME\tIDE\tSINCE\tWORKSPACE\n")
		for _, a := range st.Apps {
			row(tw, a.ID, a.Name, a.IDE, startedAt(a.Since, now, tty), a.Workspace)
		}
	}
	if len(st.Upstreams) > 0 {
		fmt.Fprintf(tw, "\nUPSTREAM\tSTATE\tPID\tPROTOCOL\tSESSIONS\tRESTARTS\tRSS\tWORKSPACE\n")
		writeUpstreams(tw, st.Upstreams)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeUpstreamErrors(stdout, st.Upstreams)
	return nil
}

// humanBytes formats n as a size in KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}

// writeIndentedJSON writes raw JSON to w indented by two spaces, with a
// final newline.
func writeIndentedJSON(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("flyd sent invalid JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// isTerminal reports whether w is a terminal, for colour and relative
// times; tests and pipes get plain output.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
