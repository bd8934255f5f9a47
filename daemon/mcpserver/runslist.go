package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runs_list: the runs and builds of a workspace, one short line each an
// agent reads at a glance; the records in full (URIs, argv, times) in the
// structured result. One-shot SDK commands (devices, doctor, create) are
// listed only when asked for.

type runsListParams struct {
	All        bool `json:"all,omitempty" jsonschema:"every workspace's"`
	IncludeSDK bool `json:"include_sdk,omitempty"`
}

// RunsListResult is runs_list's structured result.
type RunsListResult struct {
	Runs   []wire.Run `json:"runs" jsonschema:"newest first, with who started each, its last action, claim and error counts"`
	Apps   []wire.App `json:"apps" jsonschema:"Flutter apps running outside fly (an IDE's, a terminal's), found through their Dart Tooling Daemon"`
	Others []string   `json:"others,omitempty" jsonschema:"what other sessions did to this workspace's live runs since your last call"`
	// SDKLeftOut counts the one-shot flutter_sdk commands (devices, doctor,
	// create) left out of Runs: include_sdk lists them.
	SDKLeftOut int `json:"sdk_left_out,omitempty"`
}

func (t tools) runsList(ctx context.Context, req *mcp.CallToolRequest, p runsListParams) (*mcp.CallToolResult, RunsListResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, RunsListResult{}, err
	}
	root := sess.ws.Root()
	if p.All {
		root = ""
	}
	infos, err := t.s.runs.Infos(root)
	if err != nil {
		return nil, RunsListResult{}, err
	}
	ids := make([]string, len(infos))
	for i, w := range infos {
		ids[i] = w.RunID
	}
	short := shortIDs(ids) // among all listed, the commands too: a short id names one of them
	res := RunsListResult{Runs: infos, Apps: []wire.App{}}
	if !p.IncludeSDK {
		res.Runs = slices.DeleteFunc(infos, func(w wire.Run) bool { return w.Kind == string(store.KindTool) })
		res.SDKLeftOut = len(ids) - len(res.Runs)
	}
	if t.s.cfg.Apps != nil {
		res.Apps = t.s.cfg.Apps(root)
	}
	var news []string
	for _, id := range t.s.runs.LiveIDs(sess.ws.Root(), store.KindRun) {
		if r, err := t.s.runs.Get(id); err == nil {
			acts := t.s.newsOf(sess, r)
			for _, l := range newsLines(acts, "this run") {
				res.Others = append(res.Others, id+": "+l)
			}
			name := short[id]
			if name == "" {
				name = id
			}
			news = append(news, newsLines(acts, "run "+name)...)
		}
	}
	now := time.Now()
	var b strings.Builder
	for _, w := range res.Runs {
		b.WriteString(runLine(w, short[w.RunID], p.All && w.Root != sess.ws.Root(), now) + "\n")
	}
	if len(res.Runs) == 0 {
		if p.All {
			b.WriteString("flyd has no runs\n")
		} else {
			b.WriteString("no runs in this workspace yet: flutter_run starts the app (all: true lists every workspace's)\n")
		}
	}
	if res.SDKLeftOut > 0 {
		fmt.Fprintf(&b, "(%s not listed: include_sdk: true lists them)\n", plural(res.SDKLeftOut, "flutter_sdk command"))
	}
	if len(res.Apps) > 0 {
		b.WriteString("Apps started elsewhere (flutter_run attach: \"<id>\" attaches to one):\n")
		for _, a := range res.Apps {
			b.WriteString(appLine(a, p.All, now) + "\n")
		}
	}
	text := strings.TrimSuffix(b.String(), "\n")
	return textResult(withNews(news, text)), res, nil
}

// runLine is a run in one line: `01jq3v6  running  linux  by
// "claude-code"  hot-reloaded 3m ago by "cursor" #3f2a1c: applied  2
// errors`: its short id, what it is when not a flutter run, its state
// (how and when it ended), its device, who started it, the last thing a
// client did to it, its errors and its claim. Everything a client or an
// app chose is shown escaped, names quoted.
func runLine(w wire.Run, short string, showRoot bool, now time.Time) string {
	f := []string{short}
	if k := kindLabel(w); k != "" {
		f = append(f, k)
	}
	rec := store.Record{Kind: store.Kind(w.Kind), State: store.State(w.State), VMServiceURI: w.VMServiceURI, DTDURI: w.DTDURI}
	la := w.LastAction
	if w.Live() {
		f = append(f, w.State)
	} else {
		s := ended(rec)
		if !w.EndedAt.IsZero() {
			s += " " + ago(now.Sub(w.EndedAt))
		}
		if la != nil && la.What == "stop" && w.State == string(store.StateStopped) {
			s += " by " + actorName(la.By)
			la = nil // said
		}
		if w.ExitCode != nil && *w.ExitCode != 0 && w.State != string(store.StateStopped) {
			s += fmt.Sprintf(" (exit %d)", *w.ExitCode)
		}
		f = append(f, s)
	}
	if d := device(w.Argv); d != "" {
		f = append(f, safetext.Field(d))
	}
	if w.StartedBy != nil && w.StartedBy.Client != "" {
		f = append(f, "by "+strconv.Quote(w.StartedBy.Client))
	}
	if la != nil && la.What != "start" && la.What != "attach" {
		s := runs.PastTense(la.What) + " " + ago(now.Sub(la.At)) + " by " + actorName(la.By)
		if la.Forced {
			s += " (forced)"
		}
		if la.Outcome != "" {
			s += ": " + la.Outcome
		}
		f = append(f, safetext.Line(s))
	}
	if e := w.Errors; e != nil && (w.Live() || e.Total > 0) {
		n := e.Current
		if !w.Live() {
			n = e.Distinct
		}
		s := plural(n, "error")
		if n == 0 {
			s = "no errors"
		}
		if w.Live() && e.Total > e.Current {
			s += fmt.Sprintf(" (%d in all)", e.Total)
		}
		f = append(f, s)
	}
	if w.Degraded != "" {
		f = append(f, safetext.Line(w.Degraded))
	}
	if c := w.Claim; c != nil {
		s := "claimed by " + actorName(c.By) + " until " + c.Until.Local().Format("15:04:05")
		if c.Note != "" {
			s += ": " + strconv.Quote(c.Note)
		}
		f = append(f, safetext.Line(s))
	}
	if showRoot {
		f = append(f, "in "+safetext.Field(w.Root))
	}
	return strings.Join(f, "  ")
}

// kindLabel says what a run is when it is not a flutter run: "build
// apk", `app "my_app"` (attached), "attach" (the flutter attach flyd
// started for one), "devices", "upstream dart".
func kindLabel(w wire.Run) string {
	arg := func(i int) string {
		if i < len(w.Argv) {
			return safetext.Field(w.Argv[i])
		}
		return ""
	}
	switch store.Kind(w.Kind) {
	case store.KindRun:
		return ""
	case store.KindBuild:
		return "build " + arg(2)
	case store.KindTool:
		return arg(1)
	case store.KindApp:
		return "app " + strconv.Quote(arg(1))
	case store.KindUpstream:
		return "upstream " + arg(0)
	}
	return safetext.Field(w.Kind)
}

// device is the device a flutter run names with -d, "" when it names
// none (flutter picks one).
func device(argv []string) string {
	for i, a := range argv {
		switch {
		case (a == "-d" || a == "--device-id") && i+1 < len(argv):
			return argv[i+1]
		case strings.HasPrefix(a, "--device-id="):
			return strings.TrimPrefix(a, "--device-id=")
		}
	}
	return ""
}

// actorName is how other agents see a client: its name quoted, and its
// session's handle ("cursor" #3f2a1c).
func actorName(a wire.Actor) string {
	return store.Actor{Session: a.Session, Client: a.Client}.Name()
}

// appLine is an app found outside fly in one line: its id, name, IDE,
// since when, and its workspace when all are listed.
func appLine(a wire.App, showWorkspace bool, now time.Time) string {
	f := []string{safetext.Field(a.ID), strconv.Quote(a.Name)}
	if a.IDE != "" {
		f = append(f, "in "+strconv.Quote(a.IDE))
	}
	if !a.Since.IsZero() {
		f = append(f, "found "+ago(now.Sub(a.Since)))
	}
	if showWorkspace {
		f = append(f, "in "+safetext.Field(a.Workspace))
	}
	return strings.Join(f, "  ")
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
