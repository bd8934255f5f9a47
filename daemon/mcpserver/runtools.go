package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools that act on a run: hot reload, hot restart, stop and claim.
// Each is recorded with the session that asked, refused while another
// session holds a claim (unless forced), and every tool about a run tells
// the caller what other sessions did to it since the caller last asked:
// agents do not read resource notifications, so news rides on results.

type runIDParams struct {
	RunID string `json:"run_id,omitempty"`
	Force bool   `json:"force,omitempty"`
}

type reloadParams struct {
	runIDParams
	Restart bool `json:"restart,omitempty"`
}

type stopParams struct {
	runIDParams
	StopApp bool `json:"stop_app,omitempty"`
}

// actor is the session as runs record it, under its handle: runs_list,
// news and the store name a session so, never by its id, which over
// Streamable HTTP is the Mcp-Session-Id other clients must not learn.
func actor(sess *client) store.Actor {
	return store.Actor{Session: sess.Handle(), Client: sess.Info().ClientName}
}

// actorOn is actor for an action on r. A session may act on a run of a
// workspace it does not serve only by naming it (runFor never picks one
// with no run_id), and the action is recorded as from another workspace
// for the run's own sessions to see. Such a session may neither claim the
// run nor override a claim on it: the sessions that serve a workspace
// coordinate through claims, and one from outside, which runs_list all
// or an app's text led there, must not take the run from them. Reading a
// run of another workspace (logs, errors, the widget tree) stays allowed:
// it is the same user's and changes nothing.
func actorOn(sess *client, r *runs.Run, claim, force bool) (store.Actor, error) {
	a := actor(sess)
	root := r.Record().Root
	if root == "" || root == sess.ws.Root() {
		return a, nil
	}
	switch {
	case claim:
		return a, fmt.Errorf("run %s is of another workspace (%s): only a session of that workspace may claim it", r.ID(), root)
	case force:
		return a, fmt.Errorf("run %s is of another workspace (%s): a session of this one cannot override a claim on it", r.ID(), root)
	}
	a.Workspace = sess.ws.Root()
	return a, nil
}

// maxNews bounds the lines of news in one result.
const maxNews = 5

// news returns what sessions other than sess did to r since sess last
// heard of r, one line each, newest last, and moves sess's cursor.
func (s *Server) news(sess *client, r *runs.Run) []string {
	return newsLines(s.newsOf(sess, r), "this run")
}

// newsLines is news in lines, the run named as run: at most maxNews, the
// first saying how many earlier ones were left out.
func newsLines(acts []runs.Action, run string) []string {
	var lines []string
	now := time.Now()
	for _, a := range acts {
		// Names are quoted; an outcome may quote the app's message.
		lines = append(lines, safetext.Line(a.LineOn(now, run)))
	}
	if n := len(lines) - maxNews; n > 0 {
		lines = append([]string{fmt.Sprintf("… %d earlier actions by others (see runs_list)", n)}, lines[n:]...)
	}
	return lines
}

// newsOf returns what sessions other than sess did to r since sess last
// heard of r, oldest first, and moves sess's cursor. The run keeps the
// cursor, by the session's handle: a run that outlives flyd goes on
// telling a session that comes back under its handle only what is new.
func (s *Server) newsOf(sess *client, r *runs.Run) []runs.Action {
	acts := r.NewsFor(sess.Handle())
	return slices.DeleteFunc(acts, func(a runs.Action) bool { return a.By.Session == sess.Handle() })
}

// SessionEnded ends the claims of the session's handle.
func (s *Server) SessionEnded(id, handle string) {
	s.runs.ReleaseClaims(handle)
}

// withNews puts the news before a result's text: "Meanwhile: " and the
// one action on its line, or each action on a line of its own.
func withNews(news []string, text string) string {
	switch len(news) {
	case 0:
		return text
	case 1:
		return "Meanwhile: " + news[0] + "\n" + text
	}
	return "Meanwhile:\n- " + strings.Join(news, "\n- ") + "\n" + text
}

// RestartResult is the structured result of flutter_hot_reload and
// flutter_hot_restart.
type RestartResult struct {
	RunID      string     `json:"run_id"`
	Applied    bool       `json:"applied"`
	Code       int        `json:"code" jsonschema:"flutter's: 0 when applied"`
	Message    string     `json:"message"`
	Rejected   bool       `json:"rejected,omitempty" jsonschema:"the VM rejected the reload: a hot restart is needed"`
	Compile    []string   `json:"compile_output,omitempty" jsonschema:"what flutter printed on stderr meanwhile: compile errors"`
	NewErrors  []AppError `json:"new_errors" jsonschema:"the app's errors after it, until its first frame (or 1 s), newest first"`
	Settled    string     `json:"settled,omitempty" jsonschema:"first frame, or timeout when none came within 1 s"`
	TookMS     int64      `json:"took_ms"`
	SharedWith []string   `json:"shared_with,omitempty" jsonschema:"clients whose requests the same reload covered"`
	NextSince  uint64     `json:"next_since" jsonschema:"pass to flutter_errors as since for errors after this"`
	Others     []string   `json:"others,omitempty" jsonschema:"what other sessions did to this run since your last call"`
}

func (t tools) reload(ctx context.Context, req *mcp.CallToolRequest, p reloadParams) (*mcp.CallToolResult, RestartResult, error) {
	return t.restart(ctx, req, p.runIDParams, p.Restart)
}

func (t tools) hotRestart(ctx context.Context, req *mcp.CallToolRequest, p runIDParams) (*mcp.CallToolResult, RestartResult, error) {
	return t.restart(ctx, req, p, true)
}

func (t tools) restart(ctx context.Context, req *mcp.CallToolRequest, p runIDParams, full bool) (*mcp.CallToolResult, RestartResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, RestartResult{}, err
	}
	r, err := t.runFor(sess, p.RunID, toAct)
	if err != nil {
		return nil, RestartResult{}, err
	}
	id := r.ID()
	by, err := actorOn(sess, r, false, p.Force)
	if err != nil {
		return nil, RestartResult{}, err
	}
	if hasEnded(r) {
		return nil, RestartResult{}, fmt.Errorf("%s; %s", endLine(r, time.Now()), nextStep(r.Record()))
	}
	news := t.s.news(sess, r) // before the reload: it is not news to its caller
	o, err := r.Restart(ctx, full, runs.Act{By: by, Force: p.Force})
	rec := r.Record()
	var claimed *runs.ClaimedError
	switch {
	case errors.As(err, &claimed):
		return nil, RestartResult{}, errors.New(withNews(news, err.Error()))
	case errors.Is(err, runs.ErrRunEnded):
		return nil, RestartResult{}, fmt.Errorf("%s; %s", endLine(r, time.Now()), nextStep(rec))
	case errors.Is(err, runs.ErrNotStarted):
		return nil, RestartResult{}, fmt.Errorf("run %s: %w; wait for app.started (see %s)", id, runs.ErrNotStarted, runs.LogURI(rec.Kind, id))
	case err != nil:
		return nil, RestartResult{}, err
	}
	out := RestartResult{RunID: id, Applied: o.Applied(), Code: o.Code, Message: o.Message, Rejected: o.Rejected, Compile: o.Stderr,
		NewErrors: []AppError{}, Settled: o.Settled, TookMS: o.Took.Milliseconds(), Others: news}
	for _, e := range o.Errors {
		out.NewErrors = append(out.NewErrors, toAppError(e))
	}
	for _, a := range o.Shared {
		out.SharedWith = append(out.SharedWith, a.Name())
	}
	if l := r.Errors(); l != nil {
		out.NextSince = l.Rev()
	}
	text, isErr := outcomeText(o)
	if d := r.Degraded(); d != "" {
		text = "This run is " + safetext.Line(d) + ".\n" + text
	}
	return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: withNews(news, text)}}}, out, nil
}

// outcomeText says what a reload did, and whether that is an error for
// the agent.
func outcomeText(o runs.Outcome) (string, bool) {
	w := "hot reload"
	if o.Full {
		w = "hot restart"
	}
	// flutter's message and what it printed may be the app's words: one
	// line each, escaped, and the printed lines indented under fly's.
	msg := safetext.Line(o.Message)
	var b strings.Builder
	switch {
	case o.Rejected:
		fmt.Fprintf(&b, "%s rejected: %s\nThe change cannot be hot-reloaded: call flutter_hot_reload with restart: true (the app's state is lost).\n", w, msg)
	case !o.Applied():
		fmt.Fprintf(&b, "%s failed (code %d): %s\n", w, o.Code, msg)
	default:
		fmt.Fprintf(&b, "%s applied", w)
		if msg != "" {
			fmt.Fprintf(&b, " (%s)", msg)
		}
		fmt.Fprintf(&b, " in %d ms", o.Took.Milliseconds())
		if len(o.Shared) > 0 {
			names := make([]string, len(o.Shared))
			for i, a := range o.Shared {
				names[i] = a.Name()
			}
			fmt.Fprintf(&b, ", one %s with %s", w, strings.Join(names, ", "))
		}
		b.WriteString(".\n")
	}
	if len(o.Stderr) > 0 {
		b.WriteString("flutter printed:\n")
		for _, l := range o.Stderr {
			b.WriteString("  " + safetext.Line(l) + "\n")
		}
	}
	if o.Applied() {
		after := "after its first frame"
		if o.Settled != "first frame" {
			after = "within 1 s (no frame came)"
		}
		if len(o.Errors) == 0 {
			b.WriteString("No new errors " + after + ".")
		} else {
			noun := "new errors"
			if len(o.Errors) == 1 {
				noun = "new error"
			}
			fmt.Fprintf(&b, "%d %s %s:\n%s", len(o.Errors), noun, after, o.ErrorsText)
			if o.ErrorsMore {
				b.WriteString("(more: flutter_errors)")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n"), !o.Applied()
}

// StopResult is flutter_stop's structured result.
type StopResult struct {
	RunID    string   `json:"run_id"`
	State    string   `json:"state"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Others   []string `json:"others,omitempty" jsonschema:"what other sessions did to this run since your last call"`
}

func (t tools) stop(ctx context.Context, req *mcp.CallToolRequest, p stopParams) (*mcp.CallToolResult, StopResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, StopResult{}, err
	}
	r, err := t.runFor(sess, p.RunID, toAct)
	if err != nil {
		return nil, StopResult{}, err
	}
	by, err := actorOn(sess, r, false, p.Force)
	if err != nil {
		return nil, StopResult{}, err
	}
	news := t.s.news(sess, r)
	wasLive := !hasEnded(r)
	degraded := r.Degraded()
	if wasLive {
		if err := r.StopAs(ctx, runs.Act{By: by, Force: p.Force, ExitApp: p.StopApp}); err != nil {
			return nil, StopResult{}, errors.New(withNews(news, err.Error()))
		}
	}
	rec := r.Record()
	res := StopResult{RunID: rec.ID, State: string(rec.State), ExitCode: rec.ExitCode, Others: news}
	text := stopText(r, wasLive)
	if degraded != "" {
		text += " (it was " + safetext.Line(degraded) + ": flyd ended its process group itself)"
	}
	return textResult(withNews(news, text)), res, nil
}

// stopText says what a stop did, in a line: "run 01jq… stopped: exit 0",
// "detached from app 01jq…: the app keeps running", or what had become of
// a run that was no longer live.
func stopText(r *runs.Run, wasLive bool) string {
	rec := r.Record()
	switch {
	case !wasLive:
		return "nothing to stop: " + endLine(r, time.Now())
	case rec.Kind == store.KindApp && rec.State == store.StateStopped:
		return "detached from app " + rec.ID + ": the app keeps running (stop_app: true ends it)"
	case rec.Kind == store.KindApp:
		return "app " + rec.ID + " has ended"
	}
	s := kindNoun(rec.Kind) + " " + rec.ID + " " + string(rec.State)
	if rec.ExitCode != nil && *rec.ExitCode >= 0 {
		s += fmt.Sprintf(": exit %d", *rec.ExitCode)
	}
	return s
}

type claimParams struct {
	runIDParams
	Note    string `json:"note,omitempty"`
	Minutes int    `json:"minutes,omitempty" jsonschema:"default 15"`
	Release bool   `json:"release,omitempty"`
}

// ClaimResult is flutter_claim's structured result.
type ClaimResult struct {
	RunID   string    `json:"run_id"`
	Claimed bool      `json:"claimed"`
	By      string    `json:"by,omitempty"`
	Note    string    `json:"note,omitempty"`
	Until   time.Time `json:"until,omitzero"`
	Others  []string  `json:"others,omitempty" jsonschema:"what other sessions did to this run since your last call"`
}

// claim holds a run for the calling session, or releases it.
func (t tools) claim(ctx context.Context, req *mcp.CallToolRequest, p claimParams) (*mcp.CallToolResult, ClaimResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	r, err := t.runFor(sess, p.RunID, toAct)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	if p.Minutes < 0 || p.Minutes > int(runs.MaxClaim/time.Minute) {
		return nil, ClaimResult{}, fmt.Errorf("minutes is %d: give 1 to %d", p.Minutes, int(runs.MaxClaim/time.Minute))
	}
	if sess.Transient() && !p.Release {
		return nil, ClaimResult{}, errors.New("a claim needs a session that outlives this request: send an X-Fly-Client header " +
			"with a random value of your own on every request (without it, each request is a session of its own, and others could not tell you apart)")
	}
	by, err := actorOn(sess, r, true, p.Force)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	news := t.s.news(sess, r)
	act := runs.Act{By: by, Force: p.Force}
	res := ClaimResult{RunID: r.ID(), Others: news}
	if p.Release {
		if err := r.Release(act); err != nil {
			return nil, ClaimResult{}, errors.New(withNews(news, err.Error()))
		}
		return textResult(withNews(news, "run "+r.ID()+" is not claimed: others may reload and stop it")), res, nil
	}
	c, err := r.Claim(act, p.Note, time.Duration(p.Minutes)*time.Minute)
	if errors.Is(err, runs.ErrRunEnded) {
		return nil, ClaimResult{}, fmt.Errorf("%s; %s", endLine(r, time.Now()), nextStep(r.Record()))
	}
	if err != nil {
		return nil, ClaimResult{}, errors.New(withNews(news, err.Error()))
	}
	res.Claimed, res.By, res.Note, res.Until = true, c.By.Name(), c.Note, c.Until
	return textResult(withNews(news, fmt.Sprintf("run %s is yours until %s: others' reloads, restarts and stops are refused unless forced; release: true ends it",
		r.ID(), c.Until.Local().Format("15:04:05")))), res, nil
}

// textResult is a tool's result with text; the SDK adds the structured
// one.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

type attachParams struct {
	AppID        string `json:"app_id,omitempty"`
	VMServiceURI string `json:"vm_service_uri,omitempty"`
}

// attach makes an app fly did not start a run: its errors, reloads and
// records then work as for flyd's own runs.
func (t tools) attach(ctx context.Context, req *mcp.CallToolRequest, p attachParams) (*mcp.CallToolResult, RunResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, RunResult{}, err
	}
	uri, name := p.VMServiceURI, "app"
	switch {
	case (p.AppID == "") == (uri == ""):
		return nil, RunResult{}, errors.New("give app_id (see runs_list's apps) or vm_service_uri")
	case p.AppID != "":
		var found bool
		if t.s.cfg.Apps != nil {
			for _, a := range t.s.cfg.Apps(sess.ws.Root()) {
				if a.ID == p.AppID {
					uri, name, found = a.VMServiceURI, a.Name, true
				}
			}
		}
		if !found {
			return nil, RunResult{}, fmt.Errorf("no app %q in this workspace: runs_list lists the apps found", p.AppID)
		}
	}
	by := actor(sess)
	r, err := t.s.runs.Attach(runs.AttachSpec{Root: sess.ws.Root(), VMServiceURI: uri, Name: name, By: &by, Env: sess.Env(), Max: t.s.cfg.MaxRuns})
	if le := (*runs.LimitError)(nil); errors.As(err, &le) {
		return nil, RunResult{}, fmt.Errorf("%d apps are already live in this workspace, runs and attached apps together (%s): stop or detach one with flutter_stop, or start flyd with a higher --max-runs",
			le.Max, strings.Join(le.Live, ", "))
	}
	if err != nil {
		return nil, RunResult{}, err
	}
	follow, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	select {
	case <-r.VMReady():
	case <-follow.Done():
	}
	rec := r.Record()
	res := RunResult{RunID: rec.ID, State: string(rec.State), LogURI: runs.LogURI(rec.Kind, rec.ID), VMServiceURI: rec.VMServiceURI,
		Message: "attached: its errors, reloads and records work as for flyd's own runs; flutter_stop detaches (stop_app: true ends the app)"}
	return textResult(fmt.Sprintf("app %s %s attached as run %s: its errors, reloads and records work as for flyd's own runs; flutter_stop detaches (stop_app: true ends the app)",
		strconv.Quote(name), safetext.Field(uri), rec.ID)), res, nil
}
