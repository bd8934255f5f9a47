package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fly-dev/fly/internal/paths"
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
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.Socket)
		},
	}}}, nil
}

// getJSON fetches route from flyd into v, turning dial failures and
// version mismatches into errors with a hint.
func (c *client) getJSON(ctx context.Context, route string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://flyd"+route, nil)
	if err != nil {
		return err
	}
	req.Header.Set(wire.HeaderVersion, wire.VersionHeader())
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("flyd is not running (no daemon on %s); start it with: flyd run", c.socket)
		}
		return fmt.Errorf("reach flyd on %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if err := wire.CheckPeer("flyctl", "flyd", resp.Header.Get(wire.HeaderVersion)); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("flyd: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// status mirrors daemon.Status; flyctl does not import the daemon.
type status struct {
	Version   string    `json:"version"`
	Protocol  int       `json:"protocol"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	UptimeSec float64   `json:"uptime_seconds"`
	Socket    string    `json:"socket"`
	StateDir  string    `json:"state_dir"`
	Sessions  []struct {
		ID            string    `json:"id"`
		ClientName    string    `json:"client_name"`
		ClientVersion string    `json:"client_version"`
		Workspace     string    `json:"workspace"`
		PeerPID       int       `json:"peer_pid"`
		Since         time.Time `json:"since"`
		FilesRead     int64     `json:"files_read"`
	} `json:"sessions"`
	Workspaces []struct {
		Root     string `json:"root"`
		Files    int    `json:"files"`
		Sessions int    `json:"sessions"`
	} `json:"workspaces"`
}

func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl status", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the daemon's status as JSON")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flyctl status [--json]\n\nShows the daemon's version, uptime, sessions and workspaces.\n\nFlags:\n%s\nExamples:\n  flyctl status\n  flyctl status --json | jq .sessions\n", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return usagef("%v", err)
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
		_, err := fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	var st status
	if err := c.getJSON(ctx, wire.RouteStatus, &st); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "flyd %s (protocol %d), pid %d, up %s\n", st.Version, st.Protocol, st.PID, time.Duration(st.UptimeSec*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(stdout, "socket:    %s\nstate dir: %s\n", st.Socket, st.StateDir)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nWORKSPACE\tFILES\tSESSIONS\n")
	for _, w := range st.Workspaces {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", w.Root, w.Files, w.Sessions)
	}
	fmt.Fprintf(tw, "\nSESSION\tCLIENT\tPEER PID\tFILES READ\tWORKSPACE\n")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "%s\t%s %s\t%d\t%d\t%s\n", s.ID, s.ClientName, s.ClientVersion, s.PeerPID, s.FilesRead, s.Workspace)
	}
	return tw.Flush()
}

func runVersion(_ context.Context, args []string, _ func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	_, err := fmt.Fprintf(stdout, "flyctl %s (protocol %d)\n", wire.Version, wire.Protocol)
	return err
}
