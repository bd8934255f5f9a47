package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logUpdateEvery coalesces resources/updated of one log URI.
const logUpdateEvery = 50 * time.Millisecond

// maxLogRead bounds the entries of one resources/read of a log.
const maxLogRead = 5000

// parseLogURI splits a log URI into its kind ("run" or "build"), run id
// and query.
func parseLogURI(uri string) (kind, id string, q url.Values, err error) {
	u, perr := url.Parse(uri)
	if perr != nil || u.Scheme != "logs" || (u.Host != "run" && u.Host != "build" && u.Host != "upstream") {
		return "", "", nil, invalidParams("%q is not a logs://run/{id}, logs://build/{id} or logs://upstream/{id} URI", uri)
	}
	id = strings.TrimPrefix(u.Path, "/")
	if id == "" || strings.ContainsAny(id, "/\\") {
		return "", "", nil, invalidParams("%q names no run id", uri)
	}
	q, perr = url.ParseQuery(u.RawQuery)
	if perr != nil {
		return "", "", nil, invalidParams("malformed query in %q", uri)
	}
	return u.Host, id, q, nil
}

// readLog serves resources/read of logs://run/{id} and logs://build/{id}.
// The query takes since=SEQ, tail=N and start=&length= (a byte range over
// the selected text).
func (s *Server) readLog(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	_, id, qv, err := parseLogURI(uri)
	if err != nil {
		return nil, err
	}
	var q runs.Query
	var rng byteRange
	sel, err := logSelect(splitList(qv["stream"]), qv.Get("events") == "1" || qv.Get("events") == "true")
	if err != nil {
		return nil, err
	}
	q.Streams = sel.Streams
	delete(qv, "stream")
	delete(qv, "events")
	for k, vs := range qv {
		n, perr := strconv.ParseInt(vs[0], 10, 64)
		if len(vs) != 1 || perr != nil || n < 0 {
			return nil, invalidParams("query parameter %s=%q is not a non-negative integer", k, vs[0])
		}
		switch k {
		case "since":
			q.Since = uint64(n)
		case "tail":
			q.Tail = int(n)
		case "start":
			rng.start, rng.hasStart = n, true
		case "length":
			rng.length, rng.hasLength = n, true
		default:
			return nil, invalidParams("unknown query parameter %q; a log URI takes since, tail, start, length, stream and events", k)
		}
	}
	r, err := s.runs.Get(id)
	if err != nil {
		return nil, notFound(uri, err.Error())
	}
	// Page through what was asked for, up to maxLogRead entries; _meta's
	// next_since continues a longer log.
	var b strings.Builder
	page := runs.Page{Next: q.Since}
	for n := 0; n < maxLogRead; {
		q.Limit = min(runs.DefaultLimit, maxLogRead-n)
		p := r.Entries(q)
		for _, e := range p.Entries {
			b.WriteString(runs.FormatEntry(e))
			b.WriteByte('\n')
		}
		n += len(p.Entries)
		page.First, page.Last, page.Next = p.First, p.Last, p.Next
		page.Entries = append(page.Entries, p.Entries...)
		if len(p.Entries) == 0 || p.Next >= p.Last {
			break
		}
		q.Since, q.Tail = p.Next, 0
	}
	text := b.String()
	total := int64(len(text))
	start := min(rng.start, total)
	end := total
	if rng.hasLength {
		end = min(total, start+rng.length)
	}
	rec := r.Record()
	meta := mcp.Meta{
		"first_seq": page.First, "last_seq": page.Last, "entries": len(page.Entries), "next_since": page.Next,
		"total": total, "start": start, "length": end - start, "state": string(rec.State),
	}
	if !rec.State.Live() {
		meta["ended"] = endLine(r, time.Now()) // what became of it, as the read tools say
	}
	if stored, ok := r.StoredSeq(); ok {
		meta["stored_seq"] = stored // what is on disk: survives a crash of flyd
	}
	return &mcp.ReadResourceResult{
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text[start:end]}},
		Meta:     meta,
	}, nil
}

// logResources lists the logs of the runs and builds of root, newest
// first, and the errors of its live flutter runs; with none live, those
// of its most recent run or attached app, which the read tools fall back
// to, whose entries start by saying what became of it. One-shot SDK
// commands (devices, doctor) are left out, as runs_list leaves them: their
// logs are read by URI.
func (s *Server) logResources(root string) []*mcp.Resource {
	recs, err := s.runs.List(root)
	if err != nil {
		s.log.Warn("list runs", logErr, err)
		return nil
	}
	recent, fate := "", "" // the run whose errors are listed though it ended, and its end
	if rec, ok := mostRecentOf(recs); ok && !rec.State.Live() {
		recent = rec.ID
		if r, err := s.runs.Get(rec.ID); err == nil {
			fate = endLine(r, time.Now()) + ". "
		}
	}
	out := make([]*mcp.Resource, 0, len(recs))
	for _, rec := range recs {
		if rec.Kind == store.KindTool {
			continue
		}
		said := ""
		if rec.ID == recent {
			said = fate
		}
		out = append(out, &mcp.Resource{
			URI:         runs.LogURI(rec.Kind, rec.ID),
			Name:        "log-" + rec.ID,
			Title:       fmt.Sprintf("%s log: %s (%s)", rec.Kind, strings.Join(rec.Argv, " "), rec.State),
			MIMEType:    "text/plain",
			Description: said + "One line per entry: seq, time, stream (stdout, stderr, event or fly), text. Query: ?since=SEQ, ?tail=N, ?start=&length=.",
			Annotations: &mcp.Annotations{LastModified: rec.StartedAt.UTC().Format(time.RFC3339)},
		})
		if (rec.Kind == store.KindRun && rec.State.Live()) || rec.ID == recent { // a finished run keeps its counts, not its list
			out = append(out, &mcp.Resource{
				URI:         runs.ErrorsURI(rec.ID),
				Name:        "errors-" + rec.ID,
				Title:       fmt.Sprintf("errors of %s %s (%s)", kindNoun(rec.Kind), rec.ID, rec.State),
				MIMEType:    "text/plain",
				Description: said + "The app's framework errors since its last reload, one line each with a count and the error-causing widget's location, newest first.",
				Annotations: &mcp.Annotations{LastModified: rec.StartedAt.UTC().Format(time.RFC3339)},
			})
		}
	}
	return out
}

// RunChanged is called at every state change of a run. A run that
// appears or ends changes the resource list (its log, and the state in
// its title) of the sessions of its workspace, and only of those: each
// is told once when it starts and once when it ends, not at every state
// in between. A live run's log gets a follower that tells its
// subscribers it grew; Close waits for them.
func (s *Server) RunChanged(r *runs.Run) {
	live := r.Record().State.Live()
	s.mu.Lock()
	_, known := s.notifying[r.ID()]
	if !known && live {
		s.notifying[r.ID()] = true
		s.notifyWG.Add(1)
		go func() { // owned by the server: ends when the run's ring closes; Close waits
			defer s.notifyWG.Done()
			s.followLog(r)
		}()
		if r.Errors() != nil {
			s.notifyWG.Add(1)
			go func() { // owned by the server: ends when the run does; Close waits
				defer s.notifyWG.Done()
				s.followErrors(r)
			}()
		}
	}
	wasLive, listed := s.listed[r.ID()]
	announce := !listed || wasLive != live
	if live {
		s.listed[r.ID()] = true
	} else {
		delete(s.listed, r.ID())
	}
	s.mu.Unlock()
	if !announce {
		return
	}
	for _, sess := range s.sessions.All() {
		if sess.Root() == r.Root() {
			sess.Notify("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

// followLog tells subscribers of r's log that it grew, at most once per
// logUpdateEvery, until the run's ring is closed, or flyd lets go of a run
// that outlives it.
func (s *Server) followLog(r *runs.Run) {
	uri := runs.LogURI(r.Kind(), r.ID())
	seen := r.Ring().Last()
	for {
		select {
		case <-r.Ring().Wait(seen):
		case <-r.Released():
			s.mu.Lock()
			delete(s.notifying, r.ID())
			s.mu.Unlock()
			return
		}
		closed := r.Ring().Closed()
		seen = r.Ring().Last()
		for _, sess := range s.sessions.All() {
			if sess.Subscribed(uri) {
				sess.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
		if closed {
			s.mu.Lock()
			delete(s.notifying, r.ID())
			s.mu.Unlock()
			return
		}
		time.Sleep(logUpdateEvery)
	}
}

// agentStreams are what a log read shows an agent by default: the app's
// output, its errors and fly's notes, without flutter's machine-protocol
// events (app.progress, app.debugPort …), half of a fresh run's log.
var agentStreams = []logring.Stream{logring.Stdout, logring.Stderr, logring.Error, logring.Fly}

// logSelect is the selection of a log read: the named streams, else all
// of them with events, else agentStreams.
func logSelect(streams []string, events bool) (runs.Select, error) {
	if len(streams) == 0 {
		if events {
			return runs.Select{}, nil
		}
		return runs.Select{Streams: agentStreams}, nil
	}
	var sel runs.Select
	for _, s := range streams {
		st := logring.Stream(s)
		if !slices.Contains(logStreams, st) {
			return runs.Select{}, invalidParams("stream %q is not one of stdout, stderr, error, event, fly", s)
		}
		sel.Streams = append(sel.Streams, st)
	}
	return sel, nil
}

// logStreams are every stream a run's log has.
var logStreams = []logring.Stream{logring.Stdout, logring.Stderr, logring.Error, logring.Event, logring.Fly}

// splitList splits comma-separated query values.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
