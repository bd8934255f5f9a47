package runs

import (
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// LogURI names the log of a run as flyd serves it: logs://run/{id},
// logs://upstream/{id}, or logs://build/{id} for builds and one-shot
// commands. Tools, resources and the HTTP API all give this name.
func LogURI(kind store.Kind, id string) string {
	switch kind {
	case store.KindRun, store.KindApp, store.KindAttach:
		return "logs://run/" + id
	case store.KindUpstream:
		return wire.UpstreamLogURI(id)
	}
	return "logs://build/" + id
}

// Info is a run's record as tools and the HTTP API report it.
func Info(rec store.Record) wire.Run {
	w := wire.Run{
		RunID: rec.ID, Kind: string(rec.Kind), State: string(rec.State), Argv: rec.Argv, Root: rec.Root, PID: rec.PID,
		ExitCode: rec.ExitCode, StartedAt: rec.StartedAt, EndedAt: rec.EndedAt, AppID: rec.AppID,
		VMServiceURI: rec.VMServiceURI, DTDURI: rec.DTDURI, Error: rec.Error, LogURI: LogURI(rec.Kind, rec.ID),
		Crashed: Crashed(rec),
	}
	if a := rec.StartedBy; a != nil {
		w.StartedBy = &wire.Actor{Session: a.Session, Client: a.Client}
	}
	if a := rec.LastAction; a != nil {
		w.LastAction = &wire.Action{What: a.What, By: wire.Actor{Session: a.By.Session, Client: a.By.Client}, At: a.At, Outcome: a.Outcome, Forced: a.Forced}
	}
	if c := rec.Errors; c != nil {
		w.Errors = &wire.Errors{Total: c.Total, Distinct: c.Distinct, Current: c.Current, URI: ErrorsURI(rec.ID)}
	}
	return w
}

// Crashed reports whether rec is an app that failed after it had started
// (flutter gave its VM service or DTD): it crashed, where one that
// failed before then did not build or start.
func Crashed(rec store.Record) bool {
	return rec.State == store.StateFailed && (rec.Kind == store.KindRun || rec.Kind == store.KindApp) &&
		(rec.VMServiceURI != "" || rec.DTDURI != "")
}

// ErrorsURI names the resource of a flutter run's errors.
func ErrorsURI(id string) string { return "fly://runs/" + id + "/errors" }

// Info is the run as tools and the HTTP API report it, with what lives
// only in memory while it runs: its claim and its error counts.
func (r *Run) Info() wire.Run {
	rec := r.record()
	if r.errors != nil {
		st := r.errors.Stats()
		rec.Errors = &store.ErrorCounts{Total: st.Total, Distinct: st.Entries, Current: st.Current}
	}
	w := Info(rec)
	if w.Errors != nil && r.errors != nil {
		w.Errors.Dropped = r.errors.Stats().Dropped
	}
	if c, ok := r.CurrentClaim(); ok {
		w.Claim = &wire.Claim{By: wire.Actor{Session: c.By.Session, Client: c.By.Client}, Note: c.Note, Since: c.Since, Until: c.Until}
	}
	if r.live() {
		w.Holder, w.Degraded = r.Held(), r.Degraded()
	}
	return w
}

// Infos is the runs of root (all roots when "") as List gives them, with
// what the live ones hold in memory.
func (e *Engine) Infos(root string) ([]wire.Run, error) {
	recs, err := e.List(root)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Run, 0, len(recs))
	for _, rec := range recs {
		e.mu.Lock()
		r := e.runs[rec.ID]
		e.mu.Unlock()
		if r != nil {
			out = append(out, r.Info())
		} else {
			out = append(out, Info(rec))
		}
	}
	return out, nil
}
