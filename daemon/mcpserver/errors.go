package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errorsBudget is the text of one flutter_errors answer: an agent reads
// it after every edit, so it is a quarter of the log's.
const errorsBudget = 4 << 10

type errorsParams struct {
	RunID string `json:"run_id,omitempty" jsonschema:"the run; default: the live run of this workspace"`
	Since uint64 `json:"since,omitempty" jsonschema:"only errors after this cursor: pass the next_since of the previous call"`
	All   bool   `json:"all,omitempty" jsonschema:"include errors from before the last reload or restart"`
}

type errorOut struct {
	ID         uint64    `json:"id"`
	Count      int       `json:"count"`
	Summary    string    `json:"summary"`
	Library    string    `json:"library,omitempty"`
	Widget     string    `json:"widget,omitempty"`
	Location   string    `json:"location,omitempty" jsonschema:"where the error-causing widget was created: lib/x.dart:LINE:COL"`
	Frame      string    `json:"frame,omitempty" jsonschema:"the first stack frame in the project"`
	Generation int       `json:"generation" jsonschema:"reloads and restarts before the error"`
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
}

type errorsResult struct {
	RunID      string     `json:"run_id"`
	Generation int        `json:"generation"`
	Errors     []errorOut `json:"errors" jsonschema:"newest first"`
	NextSince  uint64     `json:"next_since"`
	Total      int        `json:"total" jsonschema:"errors the app reported, repeats included"`
	Dropped    int        `json:"dropped,omitempty" jsonschema:"distinct errors no longer kept"`
}

// flutterErrors returns a run's framework errors, deduplicated, newest
// first, within errorsBudget.
func (t tools) flutterErrors(ctx context.Context, req *mcp.CallToolRequest, p errorsParams) (*mcp.CallToolResult, errorsResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, errorsResult{}, err
	}
	id := p.RunID
	if id == "" {
		live := t.s.runs.LiveIDs(sess.ws.Root(), store.KindRun)
		if len(live) == 0 {
			return nil, errorsResult{}, errors.New("no live run in this workspace: start one with flutter_run, or pass run_id (see runs_list)")
		}
		var newest time.Time
		for _, l := range live { // the newest live run
			if r, err := t.s.runs.Get(l); err == nil && !r.Record().StartedAt.Before(newest) {
				id, newest = l, r.Record().StartedAt
			}
		}
		if id == "" {
			return nil, errorsResult{}, errors.New("the live run of this workspace has just ended: see runs_list")
		}
	}
	r, err := t.s.runs.Get(id)
	if err != nil {
		return nil, errorsResult{}, err
	}
	list := r.Errors()
	if list == nil {
		return nil, errorsResult{}, fmt.Errorf("run %s keeps no errors: only a flutter run started by flyd does (%s)", id, runs.LogURI(r.Kind(), id))
	}
	pg := list.Read(p.Since, p.All, errorsBudget)
	st := list.Stats()
	res := errorsResult{RunID: id, Generation: st.Generation, Errors: []errorOut{}, NextSince: pg.Next, Total: st.Total, Dropped: st.Dropped}
	for _, e := range pg.Entries {
		res.Errors = append(res.Errors, errorOut{ID: e.ID, Count: e.Count, Summary: e.Summary, Library: e.Library, Widget: e.Widget,
			Location: e.Location, Frame: e.Frame, Generation: e.Generation, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen})
	}
	text := pg.Text
	if len(pg.Entries) == 0 {
		text = "no errors"
		if !p.All && st.Generation > 0 {
			text += " since the last reload"
		}
		text += "\n"
	}
	text += fmt.Sprintf("(next_since=%d)", pg.Next)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}
