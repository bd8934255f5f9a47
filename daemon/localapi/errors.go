package localapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/fly-dev/fly/daemon/apperrors"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/wire"
)

// errorsFollowBudget bounds one page of a follow: the changes since the
// previous one.
const errorsFollowBudget = 64 << 10

// errorsPage is a run's errors that changed after since.
func errorsPage(rn *runs.Run, since uint64, all bool) wire.ErrorsPage {
	list := rn.Errors()
	pg := list.Read(since, all, errorsFollowBudget)
	st := list.Stats()
	out := wire.ErrorsPage{Type: "errors", RunID: rn.ID(), State: string(rn.Record().State), Generation: st.Generation,
		Errors: make([]wire.AppError, 0, len(pg.Entries)), NextSince: pg.Next, Total: st.Total, Dropped: st.Dropped}
	for _, e := range pg.Entries {
		out.Errors = append(out.Errors, appError(e))
	}
	return out
}

func appError(e apperrors.Entry) wire.AppError {
	return wire.AppError{ID: e.ID, Count: e.Count, Summary: e.Summary, Library: e.Library, Widget: e.Widget, Location: e.Location,
		Frame: e.Frame, Generation: e.Generation, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen, Line: e.Line()}
}

// errors answers GET /v1/runs/{id}/errors[?since=REV&all=1&follow=1]:
// the run's errors as one page, or with follow NDJSON pages of what
// changed, as it changes (at most every errorsFollowEvery), a heartbeat
// page while nothing does, and an "end" line once the run has ended.
func (a *API) errors(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := onlyParams(q, "since", "all", "follow"); err != nil {
		return err
	}
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("since=%q is not a non-negative integer", v)
		}
		since = n
	}
	all, follow := q.Get("all") == "1", q.Get("follow") == "1"
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	if rn.Errors() == nil {
		return &apiError{code: http.StatusNotFound, msg: "run " + rn.ID() + " keeps no errors: only a flutter run started by flyd does",
			hint: "its log: flyctl logs tail " + rn.ID()}
	}
	if !follow {
		writeJSON(w, http.StatusOK, errorsPage(rn, since, all))
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", wire.ContentNDJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{w: w, rc: http.NewResponseController(w), timeout: a.cfg.WriteTimeout}
	defer lw.rc.SetWriteDeadline(time.Time{})
	ctx := r.Context()
	beat := time.NewTicker(a.cfg.Heartbeat)
	defer beat.Stop()
	write := true // the first page, even empty
	for {
		changed := rn.Errors().Changed() // before the read: nothing is missed between
		if pg := errorsPage(rn, since, all); write || len(pg.Errors) > 0 {
			lw.add(pg) // an empty page is a heartbeat
			since = pg.NextSince
			if err := lw.flush(); err != nil {
				return streamError{err}
			}
		}
		write = false
		select {
		case <-changed:
		case <-beat.C:
			write = true
			continue
		case <-rn.Done():
			if pg := errorsPage(rn, since, all); len(pg.Errors) > 0 {
				lw.add(pg)
			}
			rec := rn.Record()
			lw.add(statusLine{Type: wire.LogLineEnd, State: string(rec.State), Crashed: runs.Crashed(rec)})
			if err := lw.flush(); err != nil {
				return streamError{err}
			}
			return nil
		case <-ctx.Done():
			return nil
		}
		select { // a flood of errors is a page per tick
		case <-time.After(errorsFollowEvery):
		case <-ctx.Done():
			return nil
		}
	}
}

// errorsFollowEvery is the shortest time between two pages of a follow.
const errorsFollowEvery = 100 * time.Millisecond
