package localclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fly-dev/fly/internal/wire"
)

// Status is GET RouteStatus: flyd's version, sessions, workspaces, live
// runs and upstreams.
func (c *Client) Status(ctx context.Context) (*wire.Status, error) {
	var st wire.Status
	if err := c.call(ctx, http.MethodGet, wire.RouteStatus, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// StatusJSON is Status as flyd sent it, for a client that passes it on
// with the fields this build does not know.
func (c *Client) StatusJSON(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, wire.RouteStatus, nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// maxPing bounds the status document Ping reads.
const maxPing = 1 << 20

// Ping returns the pid of the flyd that answers on the socket, whatever
// its protocol: it tells whether a flyd runs there, not whether this
// build can use it.
func (c *Client) Ping(ctx context.Context) (pid int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://flyd"+wire.RouteStatus, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(wire.HeaderVersion, wire.VersionHeader())
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPing)).Decode(&st); err != nil || st.PID == 0 {
		return 0, fmt.Errorf("flyd answered %s without its pid", resp.Status)
	}
	return st.PID, nil
}

// RunList is GET RouteRuns: flyd's runs, newest first, and the apps it
// found running outside fly. RawRuns and RawApps hold each as flyd sent
// it, for a client that passes them on with the fields this build does
// not know.
type RunList struct {
	Runs    []wire.Run
	Apps    []wire.App
	RawRuns []json.RawMessage
	RawApps []json.RawMessage
}

// Runs lists flyd's runs and the apps found outside fly.
func (c *Client) Runs(ctx context.Context) (*RunList, error) {
	var reply wire.RunsReply[json.RawMessage, json.RawMessage]
	if err := c.call(ctx, http.MethodGet, wire.RouteRuns, nil, &reply); err != nil {
		return nil, err
	}
	l := &RunList{RawRuns: reply.Runs, RawApps: reply.Apps, Runs: make([]wire.Run, len(reply.Runs)), Apps: make([]wire.App, len(reply.Apps))}
	for i, raw := range reply.Runs {
		if err := json.Unmarshal(raw, &l.Runs[i]); err != nil {
			return nil, fmt.Errorf("read flyd's run list: %w", err)
		}
	}
	for i, raw := range reply.Apps {
		if err := json.Unmarshal(raw, &l.Apps[i]); err != nil {
			return nil, fmt.Errorf("read flyd's app list: %w", err)
		}
	}
	return l, nil
}

// Run is GET RouteRun: the run with exactly this id. An unknown id is an
// *APIError for which IsNotFound holds.
func (c *Client) Run(ctx context.Context, id string) (*wire.Run, error) {
	var r wire.Run
	if err := c.call(ctx, http.MethodGet, runRoute(wire.RouteRun, id), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Stop is POST RouteRunStop: it stops the run as the flutter_stop tool
// does and returns its final record, decoded and as flyd sent it.
// Stopping a run that has ended returns how it ended.
func (c *Client) Stop(ctx context.Context, id string) (*wire.Run, json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, runRoute(wire.RouteRunStop, id), nil, &raw); err != nil {
		return nil, nil, err
	}
	var r wire.Run
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("read flyd's answer: %w", err)
	}
	return &r, raw, nil
}

// maxErrorsPage bounds one errors page.
const maxErrorsPage = 8 << 20

// Errors is GET RouteRunErrors: a flutter run's framework errors, those
// since the last reload or restart unless all, decoded and as flyd sent
// them.
func (c *Client) Errors(ctx context.Context, id string, all bool) (*wire.ErrorsPage, json.RawMessage, error) {
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunErrors, id), errorsQuery(all, false))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorsPage))
	if err != nil {
		return nil, nil, err
	}
	var pg wire.ErrorsPage
	if err := json.Unmarshal(b, &pg); err != nil {
		return nil, nil, fmt.Errorf("read flyd's errors page: %w", err)
	}
	return &pg, b, nil
}

// FollowErrors is GET RouteRunErrors with follow: a stream of errors
// pages, the errors so far and then each error again as it is seen,
// ending with a page of type wire.LogLineEnd when the run ends.
func (c *Client) FollowErrors(ctx context.Context, id string, all bool) (*Stream[wire.ErrorsPage], error) {
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunErrors, id), errorsQuery(all, true))
	if err != nil {
		return nil, err
	}
	return newStream[wire.ErrorsPage](resp.Body), nil
}

func errorsQuery(all, follow bool) url.Values {
	q := url.Values{}
	if all {
		q.Set("all", "1")
	}
	if follow {
		q.Set("follow", "1")
	}
	return q
}

// AllLines is LogsOptions.Tail for the whole history.
const AllLines = -1

// LogsOptions says which lines of a run's log Logs asks for.
type LogsOptions struct {
	After  uint64 // only the lines after this seq (0: from the start)
	Tail   int    // of those, only the last Tail entries (0: none); AllLines for all
	Follow bool   // then the lines as they come, until the run ends
}

// Logs is GET RouteRunLogs: a stream of wire.LogLine (entries, gaps and
// heartbeats) that ends with an "end" line (without Follow) or an "exit"
// line (the followed run ended). A stream that ends without either was
// cut.
func (c *Client) Logs(ctx context.Context, id string, o LogsOptions) (*Stream[wire.LogLine], error) {
	q := url.Values{}
	q.Set("after", strconv.FormatUint(o.After, 10))
	if o.Tail >= 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunLogs, id), q)
	if err != nil {
		return nil, err
	}
	return newStream[wire.LogLine](resp.Body), nil
}

// maxScreenshot bounds a screenshot's PNG.
const maxScreenshot = 64 << 20

// Screenshot is what a run's app shows, as a PNG of Width×Height pixels.
type Screenshot struct {
	PNG           []byte
	Width, Height int
}

// Screenshot is GET RouteRunScreenshot: the app's screen at its own size,
// or scaled down to at most maxWidth pixels wide when maxWidth > 0.
func (c *Client) Screenshot(ctx context.Context, id string, maxWidth int) (*Screenshot, error) {
	q := url.Values{}
	if maxWidth > 0 {
		q.Set("max_width", strconv.Itoa(maxWidth))
	}
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunScreenshot, id), q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	png, err := io.ReadAll(io.LimitReader(resp.Body, maxScreenshot))
	if err != nil {
		return nil, fmt.Errorf("read the screenshot: %w", err)
	}
	w, _ := strconv.Atoi(resp.Header.Get(wire.HeaderWidth))
	h, _ := strconv.Atoi(resp.Header.Get(wire.HeaderHeight))
	return &Screenshot{PNG: png, Width: w, Height: h}, nil
}

// GrepQuery is one page of a search of a workspace's files.
type GrepQuery struct {
	Workspace  string // the served workspace's root
	Pattern    string // an RE2 regular expression, or a fixed string with Literal
	Literal    bool
	IgnoreCase bool
	Glob       string // only the files whose path matches it
	Context    int    // lines before and after each match
	Limit      int    // matches on this page
	Cursor     string // the previous page's NextCursor
}

// Grep is GET RouteGrep: one page of a search of a workspace's files, as
// the files_grep tool does it; flyd starts indexing the workspace if no
// session has.
func (c *Client) Grep(ctx context.Context, g GrepQuery) (*wire.GrepResult, error) {
	q := url.Values{"workspace": {g.Workspace}, "pattern": {g.Pattern}, "context": {strconv.Itoa(g.Context)}}
	if g.Glob != "" {
		q.Set("glob", g.Glob)
	}
	if g.IgnoreCase {
		q.Set("i", "1")
	}
	if g.Literal {
		q.Set("literal", "1")
	}
	if g.Limit > 0 {
		q.Set("limit", strconv.Itoa(g.Limit))
	}
	if g.Cursor != "" {
		q.Set("cursor", g.Cursor)
	}
	var res wire.GrepResult
	if err := c.call(ctx, http.MethodGet, wire.RouteGrep, q, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RestartUpstream is POST RouteUpstreams NAME/restart: it restarts every
// process of the upstream server name ("*" for every upstream) and
// returns how many it restarted.
func (c *Client) RestartUpstream(ctx context.Context, name string) (int, error) {
	var res struct {
		Restarted int `json:"restarted"`
	}
	if err := c.call(ctx, http.MethodPost, wire.RouteUpstreams+url.PathEscape(name)+"/restart", nil, &res); err != nil {
		return 0, err
	}
	return res.Restarted, nil
}

// Shutdown asks flyd to stop (the runs their holders keep go on, for the
// next flyd; the others stop with it) and returns its pid once flyd has
// accepted; flyd is then stopping, not yet gone.
func (c *Client) Shutdown(ctx context.Context) (int, error) {
	return c.StopDaemon(ctx, wire.ShutdownRequest{})
}

// StopDaemon is Shutdown as req asks: with req.Runs, every run stops too.
func (c *Client) StopDaemon(ctx context.Context, req wire.ShutdownRequest) (int, error) {
	var q url.Values
	if req.Runs {
		q = url.Values{wire.QueryShutdownRuns: {"1"}}
	}
	var res struct {
		PID int `json:"pid"`
	}
	if err := c.call(ctx, http.MethodPost, wire.RouteShutdown, q, &res); err != nil {
		return 0, err
	}
	return res.PID, nil
}

// RotateToken is POST RouteTokenRotate: flyd replaces its loopback
// listener's token and returns the new one.
func (c *Client) RotateToken(ctx context.Context) (string, error) {
	var res struct {
		Token string `json:"token"`
	}
	if err := c.call(ctx, http.MethodPost, wire.RouteTokenRotate, nil, &res); err != nil {
		return "", err
	}
	return res.Token, nil
}
