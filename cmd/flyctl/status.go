package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// client is flyctl's HTTP client for flyd's socket.
type client struct {
	socket string
	http   *http.Client
}

func newClient(getenv func(string) string) (*client, error) {
	p, err := paths.Resolve(getenv)
	if err != nil {
		return nil, err
	}
	return &client{socket: p.Socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if err := paths.CheckSocketTrust(p.Socket); err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.Socket)
		},
	}}}, nil
}

// errNoDaemon is a dial failure: nothing listens on the socket. A log
// follow that lost its daemon retries on it.
var errNoDaemon = errors.New("flyd is not running")

// apiError is an error answer of flyd's HTTP API.
type apiError struct {
	status int
	msg    string
	hint   string
}

func (e *apiError) Error() string {
	if e.hint != "" {
		return e.msg + "; " + e.hint
	}
	return e.msg
}

// do sends method route?query to flyd and returns the response of a 2xx
// answer, whose body the caller closes. Dial failures, a daemon of another
// protocol and error answers become errors with a hint; it is the one
// place that does so.
func (c *client) do(ctx context.Context, method, route string, query url.Values) (*http.Response, error) {
	u := "http://flyd" + route
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(wire.HeaderVersion, wire.VersionHeader())
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w (no daemon on %s); try: flyctl service start, or run it in the foreground with: flyd run", errNoDaemon, c.socket)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reach flyd on %s: %w", c.socket, err)
	}
	if err := wire.CheckPeer("flyctl", "flyd", resp.Header.Get(wire.HeaderVersion)); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		e := &apiError{status: resp.StatusCode}
		var reply struct {
			Error string `json:"error"`
			Hint  string `json:"hint"`
		}
		if json.Unmarshal(b, &reply) == nil && reply.Error != "" {
			e.msg, e.hint = reply.Error, reply.Hint
		} else if e.msg = strings.TrimSpace(string(b)); e.msg == "" {
			e.msg = "flyd answered " + resp.Status
		}
		return nil, e
	}
	return resp, nil
}

// getJSON fetches route from flyd into v (see do for the errors).
func (c *client) getJSON(ctx context.Context, route string, v any) error {
	return c.callJSON(ctx, http.MethodGet, route, nil, v)
}

// callJSON sends method route?query and decodes the JSON answer into v.
func (c *client) callJSON(ctx context.Context, method, route string, query url.Values, v any) error {
	resp, err := c.do(ctx, method, route, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read flyd's answer to %s %s: %w", method, route, err)
	}
	return nil
}

// runRoute fills a run route's {id}.
func runRoute(route, id string) string {
	return strings.Replace(route, "{id}", url.PathEscape(id), 1)
}

// status is flyd's status document.
type status = wire.Status

const statusUsage = `Usage:
  flyctl status [--json]

Shows the daemon's version, pid, uptime, socket, state directory and the
size of its database, then its workspaces, its MCP sessions (client,
peer pid, workspace), its live runs and its shared upstream MCP servers. --json prints flyd's status
document as is; its fields may grow but never change meaning.

Exits 1 when flyd is not running.

Flags:
%s
Examples:
  flyctl status
  flyctl status --json | jq '.sessions[].client_name'
`

func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl status", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the daemon's status as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, statusUsage, fs.FlagUsages())
			return nil
		}
		return usagef("status: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("status takes no arguments, got %q", fs.Args())
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	if *asJSON {
		var raw json.RawMessage
		if err := c.getJSON(ctx, wire.RouteStatus, &raw); err != nil {
			return err
		}
		return writeIndentedJSON(stdout, raw)
	}
	var st status
	if err := c.getJSON(ctx, wire.RouteStatus, &st); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "flyd %s (protocol %d), pid %d, up %s\n", st.Version, st.Protocol, st.PID, time.Duration(st.UptimeSec*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(stdout, "socket:    %s\nstate dir: %s\ndatabase:  %s (%s)\n", st.Socket, st.StateDir, paths.Paths{StateDir: st.StateDir}.DB(), humanBytes(st.DBBytes))
	if st.HTTP != "" {
		fmt.Fprintf(stdout, "http:      http://%s (MCP at /mcp, dashboard at /; flyctl dashboard, flyctl token print)\n", st.HTTP)
	}
	for _, n := range st.Notices {
		fmt.Fprintf(stdout, "NOTICE:    %s\n", safetext.Line(n))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nWORKSPACE\tFILES\tSESSIONS\n")
	for _, w := range st.Workspaces {
		row(tw, w.Root, strconv.Itoa(w.Files), strconv.Itoa(w.Sessions))
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

func runVersion(_ context.Context, args []string, _ func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	_, err := fmt.Fprintf(stdout, "flyctl %s (protocol %d)\n", wire.Version, wire.Protocol)
	return err
}
