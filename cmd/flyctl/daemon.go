package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// daemonStopAbout is what flyctl daemon stop --help says it does.
const daemonStopAbout = `Stops flyd cleanly, however it was started (by an editor's flyctl mcp, by
the login service, or by hand). Its flutter runs go on, each kept by its
holder, and the next flyd takes them back (logs, reloads, stop); builds
and one-shot commands stop as flutter_stop stops them. With --runs, every
run is stopped too, and nothing of flyd's is left. flyd starts again when
an editor connects (flyctl mcp starts it when none answers) and, if the
service is installed, at your next login. Stopping a flyd that is not
running is not an error.`

type daemonStopOptions struct {
	json    bool
	runs    bool
	timeout time.Duration
}

func (o *daemonStopOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, `print {"stopped": bool, "pid": N} as JSON`)
	fs.BoolVar(&o.runs, "runs", false, "stop every run too (they outlive flyd otherwise)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for flyd to exit (its runs' stop grace included)")
}

// cmdDaemonStop is "flyctl daemon stop": POST /v1/shutdown, then wait
// until nothing answers on the socket.
func cmdDaemonStop(ctx context.Context, c *call, o *daemonStopOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	lc, err := newClient(c.getenv)
	if err != nil {
		return err
	}
	defer lc.CloseIdleConnections()
	pid, err := lc.StopDaemon(ctx, wire.ShutdownRequest{Runs: o.runs})
	switch {
	case errors.Is(err, localclient.ErrNoDaemon):
		return c.report(o.json, false, 0, "flyd is not running")
	case err != nil:
		return fmt.Errorf("stop flyd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for {
		lc.CloseIdleConnections()
		if _, err := lc.Status(ctx); errors.Is(err, localclient.ErrNoDaemon) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flyd (pid %d) was asked to stop but still answers after %s; its log says why (flyctl service status names it)", pid, o.timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
	what := fmt.Sprintf("stopped flyd (pid %d); its flutter runs go on, and the next flyd takes them back", pid)
	if o.runs {
		what = fmt.Sprintf("stopped flyd (pid %d) and its runs", pid)
	}
	again := "; an editor's flyctl mcp starts it again when it connects"
	if c.serviceInstalled() {
		again += ", and the login service at your next login"
	}
	return c.report(o.json, true, pid, what+again)
}

// serviceInstalled says whether the login service runs flyd for these
// paths: it serves the default ones only.
func (c *call) serviceInstalled() bool {
	if c.getenv(paths.EnvSocket) != "" || c.getenv(paths.EnvStateDir) != "" {
		return false
	}
	p, err := c.svc().platform()
	if err != nil {
		return false
	}
	ok, _ := c.svc().unitExists(p)
	return ok
}

// report prints daemon stop's outcome: text, or JSON.
func (c *call) report(asJSON, stopped bool, pid int, text string) error {
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(struct {
			Stopped bool `json:"stopped"`
			PID     int  `json:"pid,omitempty"`
		}{stopped, pid})
	}
	_, err := fmt.Fprintln(c.stdout, text)
	return err
}
