package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errorsBudget is the text of one flutter_errors answer: an agent reads
// it after every edit, so it is a quarter of the log's.
const errorsBudget = 4 << 10

type errorsParams struct {
	RunID string `json:"run_id,omitempty"`
	Since uint64 `json:"since,omitempty"`
	All   bool   `json:"all,omitempty" jsonschema:"from before the last reload too"`
}

// AppError is one of an app's framework errors, deduplicated, as
// flutter_errors and a reload's result give it.
type AppError struct {
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

// ErrorsResult is flutter_errors' structured result.
type ErrorsResult struct {
	RunID      string     `json:"run_id"`
	Generation int        `json:"generation"`
	Errors     []AppError `json:"errors" jsonschema:"newest first"`
	NextSince  uint64     `json:"next_since"`
	Total      int        `json:"total" jsonschema:"errors the app reported, repeats included"`
	Dropped    int        `json:"dropped,omitempty" jsonschema:"distinct errors no longer kept"`
	Others     []string   `json:"others,omitempty" jsonschema:"what other sessions did to this run since your last call"`
}

// flutterErrors returns a run's framework errors, deduplicated, newest
// first, within errorsBudget.
func (t tools) flutterErrors(ctx context.Context, req *mcp.CallToolRequest, p errorsParams) (*mcp.CallToolResult, ErrorsResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, ErrorsResult{}, err
	}
	r, err := t.runFor(sess, p.RunID, toRead)
	if err != nil {
		return nil, ErrorsResult{}, err
	}
	list := r.Errors()
	if list == nil && !appKind(r.Kind()) {
		return nil, ErrorsResult{}, fmt.Errorf("%s %s keeps no errors: only a flutter run or an attached app does (%s)", kindNoun(r.Kind()), r.ID(), runs.LogURI(r.Kind(), r.ID()))
	}
	news := t.s.news(sess, r)
	var res ErrorsResult
	var text string
	if list != nil {
		res, text = errorsPage(r.ID(), list, p.Since, p.All)
	} else {
		res, text = lostErrors(r)
	}
	if hasEnded(r) {
		text = endLine(r, time.Now()) + "\n" + text
	}
	res.Others = news
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: withNews(news, text)}}}, res, nil
}

// lostErrors is the answer about a run that has ended whose error list
// is no longer kept (flyd restarted, or other runs ended since): its
// counts, and where the log has them.
func lostErrors(r *runs.Run) (ErrorsResult, string) {
	res := ErrorsResult{RunID: r.ID(), Errors: []AppError{}}
	text := "its error list is no longer kept"
	if c := r.Record().Errors; c != nil {
		res.Total = c.Total
		text = fmt.Sprintf("%d errors (%d distinct) were reported; the list is no longer kept", c.Total, c.Distinct)
	}
	return res, text + fmt.Sprintf(": the log has them (logs_read run_id=%s streams=[\"error\",\"stderr\"])", r.ID())
}

// errorsPage is a page of a run's errors as the tool and the resource
// give it: the structured result and its text.
func errorsPage(id string, list *apperrors.List, since uint64, all bool) (ErrorsResult, string) {
	pg := list.Read(since, all, errorsBudget)
	st := list.Stats()
	res := ErrorsResult{RunID: id, Generation: st.Generation, Errors: []AppError{}, NextSince: pg.Next, Total: st.Total, Dropped: st.Dropped}
	for _, e := range pg.Entries {
		res.Errors = append(res.Errors, toAppError(e))
	}
	text := pg.Text
	if len(pg.Entries) == 0 {
		text = "no errors"
		if since > 0 {
			text = "no new errors"
		}
		if !all && st.Generation > 0 {
			text += " since the last reload"
		}
		text += "\n"
	}
	text += fmt.Sprintf("(next_since=%d)", pg.Next)
	return res, text
}

func toAppError(e apperrors.Entry) AppError {
	return AppError{ID: e.ID, Count: e.Count, Summary: e.Summary, Library: e.Library, Widget: e.Widget,
		Location: e.Location, Frame: e.Frame, Generation: e.Generation, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen}
}

// errorsUpdateEvery coalesces resources/updated of one run's errors.
const errorsUpdateEvery = 100 * time.Millisecond

// parseErrorsURI returns the run id of fly://runs/{id}/errors.
func parseErrorsURI(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, "fly://runs/")
	id, ok2 := strings.CutSuffix(rest, "/errors")
	if !ok || !ok2 || id == "" || strings.ContainsAny(id, "/?#\\") {
		return "", invalidParams("%q is not a fly://runs/{id}/errors URI", uri)
	}
	return id, nil
}

// readErrors serves resources/read of fly://runs/{id}/errors: the run's
// errors of the current generation, as flutter_errors gives them.
func (s *Server) readErrors(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, err := parseErrorsURI(uri)
	if err != nil {
		return nil, err
	}
	r, err := s.runs.Get(id)
	if err != nil {
		return nil, notFound(uri, err.Error())
	}
	var res ErrorsResult
	var text string
	switch {
	case r.Errors() != nil:
		res, text = errorsPage(id, r.Errors(), 0, false)
	case appKind(r.Kind()) && hasEnded(r):
		res, text = lostErrors(r)
	default:
		return nil, notFound(uri, "run "+id+" keeps no errors: only a flutter run or an attached app does")
	}
	if hasEnded(r) {
		text = endLine(r, time.Now()) + "\n" + text
	}
	return &mcp.ReadResourceResult{
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}},
		Meta:     mcp.Meta{"generation": res.Generation, "total": res.Total, "next_since": res.NextSince, "dropped": res.Dropped},
	}, nil
}

// followErrors tells the subscribers of r's errors resource that it
// changed, at most once per errorsUpdateEvery, until the run ends or flyd
// lets go of it.
func (s *Server) followErrors(r *runs.Run) {
	uri := runs.ErrorsURI(r.ID())
	list := r.Errors()
	told := list.Rev()
	for {
		changed := list.Changed() // before the check: nothing is missed between
		if list.Rev() == told {
			select {
			case <-changed:
			case <-r.Done():
				return
			case <-r.Released():
				return
			}
		}
		told = list.Rev()
		for _, sess := range s.sessions.All() {
			if sess.Subscribed(uri) {
				sess.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
		select { // what comes meanwhile is told at the end of the wait
		case <-time.After(errorsUpdateEvery):
		case <-r.Done():
			return
		case <-r.Released():
			return
		}
	}
}
