package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/runs"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// heartbeatEvery is how often a log follow with nothing to send writes a
// heartbeat line, so that a client can tell an idle run from a dead
// connection. It is read when the routes are registered; tests shorten it
// before they build a Handler.
var heartbeatEvery = 15 * time.Second

// Log attribute keys of the HTTP API.
const (
	logPath   = "path"
	logStatus = "status"
)

// runsAPI serves the runs routes for flyctl: list, get, stop and the
// NDJSON log stream. Each route is one method; addRunRoutes registers
// them all.
type runsAPI struct {
	s         *Server
	heartbeat time.Duration
}

// lines returns the cache of encoded log lines of rn, shared by all its
// followers; runChanged drops it when the run ends.
func (a *runsAPI) lines(rn *runs.Run) *lineCache {
	if c, ok := a.s.lineCaches.Load(rn.ID()); ok {
		return c.(*lineCache)
	}
	c, _ := a.s.lineCaches.LoadOrStore(rn.ID(), new(lineCache))
	return c.(*lineCache)
}

// addRunRoutes registers the runs routes on mux.
func (s *Server) addRunRoutes(mux *http.ServeMux) {
	a := &runsAPI{s: s, heartbeat: heartbeatEvery}
	mux.HandleFunc("GET "+wire.RouteRuns, a.route(a.list))
	mux.HandleFunc("GET "+wire.RouteRun, a.route(a.get))
	mux.HandleFunc("POST "+wire.RouteRunStop, a.route(a.stop))
	mux.HandleFunc("POST "+wire.RouteRunReload, a.route(a.reload))
	mux.HandleFunc("GET "+wire.RouteEvents, a.route(a.events))
	mux.HandleFunc("GET "+wire.RouteRunLogs, a.route(a.logs))
}

// apiError is an error with the HTTP status and the hint it is answered
// with.
type apiError struct {
	code int
	msg  string
	hint string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// errorReply is the body of every error answer of the HTTP API.
type errorReply struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}

// streamError ends a log stream whose headers are already sent: it is
// logged, never answered.
type streamError struct{ err error }

func (e streamError) Error() string { return e.err.Error() }
func (e streamError) Unwrap() error { return e.err }

// route turns a handler's error into its JSON answer, the one place that
// does so, and logs the request.
func (a *runsAPI) route(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		err := h(w, r)
		status := http.StatusOK
		var se streamError
		var ae *apiError
		switch {
		case err == nil:
		case errors.As(err, &se):
			if errors.Is(err, os.ErrDeadlineExceeded) {
				a.s.followersCut.Add(1)
			}
		case errors.As(err, &ae):
			status = ae.code
			writeJSON(w, status, errorReply{Error: ae.msg, Hint: ae.hint})
		default:
			status = http.StatusInternalServerError
			writeJSON(w, status, errorReply{Error: err.Error()})
		}
		attrs := []any{logCID, fmt.Sprintf("h%x", requestSeq.Add(1)), logMethod, r.Method, logPath, r.URL.Path,
			logStatus, status, logElapsed, float64(time.Since(start).Microseconds()) / 1000}
		if err != nil {
			attrs = append(attrs, logErr, err.Error())
		}
		a.s.log.Debug("http request", attrs...)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// onlyParams refuses query parameters other than names, and repeated ones.
func onlyParams(q url.Values, names ...string) error {
	for k, vs := range q {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		switch {
		case !known && len(names) == 0:
			return badRequest("unknown query parameter %q; this route takes none", k)
		case !known:
			return badRequest("unknown query parameter %q; this route takes %s", k, strings.Join(names, ", "))
		}
		if len(vs) != 1 {
			return badRequest("query parameter %q is given %d times", k, len(vs))
		}
	}
	return nil
}

// runsReply is the body of GET /v1/runs.
type runsReply struct {
	Runs []RunInfo `json:"runs"`
}

// list answers GET /v1/runs: the runs of every workspace (all=1 is the
// default here), or of root=/abs, newest first.
func (a *runsAPI) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := onlyParams(q, "all", "root"); err != nil {
		return err
	}
	if v := q.Get("all"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return badRequest("all=%q is not a boolean (1, 0, true or false)", v)
		}
	}
	root := q.Get("root")
	if root != "" {
		if !filepath.IsAbs(root) {
			return badRequest("root=%q is not an absolute path", root)
		}
		// Workspaces are keyed by their resolved path; a root that no
		// longer exists can still name the runs it had.
		if resolved, err := filepath.EvalSymlinks(root); err == nil {
			root = resolved
		} else {
			root = filepath.Clean(root)
		}
	}
	recs, err := a.s.runs.List(root)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	reply := runsReply{Runs: make([]RunInfo, 0, len(recs))}
	for _, rec := range recs {
		reply.Runs = append(reply.Runs, runs.Info(rec))
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

// find returns the run named by the request path.
func (a *runsAPI) find(r *http.Request) (*runs.Run, error) {
	id := r.PathValue("id")
	rn, err := a.s.runs.Get(id)
	if errors.Is(err, runs.ErrNoSuchRun) {
		return nil, &apiError{code: http.StatusNotFound, msg: fmt.Sprintf("no such run %q", id),
			hint: "list the runs with: flyctl runs --all"}
	}
	if err != nil {
		return nil, fmt.Errorf("find run %s: %w", id, err)
	}
	return rn, nil
}

// get answers GET /v1/runs/{id}.
func (a *runsAPI) get(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runs.Info(rn.Record()))
	return nil
}

// stop answers POST /v1/runs/{id}/stop: app.stop, SIGTERM, SIGKILL, as
// flutter_stop does, then the run's final state. Stopping an ended run
// just returns it. A client that hangs up does not cut the stop short
// (that would skip the graceful steps): it is bounded by the grace periods.
func (a *runsAPI) stop(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	if err := rn.Stop(context.WithoutCancel(r.Context())); err != nil {
		return fmt.Errorf("stop run %s: %w", rn.ID(), err)
	}
	writeJSON(w, http.StatusOK, runs.Info(rn.Record()))
	return nil
}

// reload answers POST /v1/runs/{id}/reload[?full=1]: a hot reload (or
// restart) as flutter_hot_reload does, with flutter's answer.
func (a *runsAPI) reload(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), "full"); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	res, err := rn.Restart(r.Context(), r.URL.Query().Get("full") == "1")
	if err != nil {
		return &apiError{code: http.StatusConflict, msg: err.Error()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": res.Code, "message": res.Message})
	return nil
}

// events answers GET /v1/events: the status document now, then again
// each time it changes (coalesced, at most every 100 ms), and a heartbeat
// line when nothing changed for a while. The dashboard lives on it.
func (a *runsAPI) events(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", wire.ContentNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		changed := a.s.changes.wait()
		_ = rc.SetWriteDeadline(time.Now().Add(a.s.cfg.WriteTimeout))
		if err := enc.Encode(a.s.status()); err != nil {
			return streamError{err}
		}
		if err := rc.Flush(); err != nil {
			return streamError{err}
		}
		t := time.NewTimer(a.heartbeat)
		select {
		case <-r.Context().Done():
			t.Stop()
			return nil
		case <-a.s.changes.closed():
			t.Stop()
			return nil
		case <-changed:
			t.Stop()
			select { // coalesce a burst
			case <-r.Context().Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		case <-t.C:
		}
	}
}

// logsParams is the query of GET /v1/runs/{id}/logs.
type logsParams struct {
	after   uint64 // entries after this seq
	tail    int    // only the last tail entries (after after)
	hasTail bool   // tail was given; tail=0 means none of the history
	follow  bool
}

func parseLogsParams(q url.Values) (logsParams, error) {
	var p logsParams
	if err := onlyParams(q, "after", "tail", "follow"); err != nil {
		return p, err
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return p, badRequest("after=%q is not a seq (a non-negative integer)", v)
		}
		p.after = n
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return p, badRequest("tail=%q is not a number of lines (a non-negative integer)", v)
		}
		p.tail, p.hasTail = int(n), true
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, badRequest("follow=%q is not a boolean (1, 0, true or false)", v)
		}
		p.follow = b
	}
	return p, nil
}

// The NDJSON lines of a log stream are the wire types.
type (
	entryLine     = wire.EntryLine
	gapLine       = wire.GapLine
	heartbeatLine = wire.HeartbeatLine
	statusLine    = wire.StatusLine
)

// lineWriter writes the NDJSON lines of one log stream. Lines are
// buffered and written in batches by flush, each under a write deadline,
// so a client that stops reading is cut instead of holding its handler.
type lineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
	last    uint64 // seq of the last entry or gap line added: the client's cursor
	lines   *lineCache
}

func (lw *lineWriter) add(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the line types always encode
	}
	lw.buf.Write(b)
	lw.buf.WriteByte('\n')
}

// entries adds the entries after the cursor. Any seq missing before an
// entry (a store that dropped or trimmed entries) becomes a gap line, so
// the client always learns what it did not get.
func (lw *lineWriter) entries(es []logring.Entry) {
	for _, e := range es {
		if e.Seq <= lw.last {
			continue
		}
		if e.Gap != nil {
			lw.add(gapLine{Type: wire.LogLineGap, Seq: e.Seq, Time: e.Time, Lost: e.Gap.Lost, Resume: e.Gap.Resume, Text: e.Text})
			lw.last = e.Seq
			continue
		}
		if e.Seq > lw.last+1 {
			lost := e.Seq - lw.last - 1
			lw.add(gapLine{Type: wire.LogLineGap, Seq: e.Seq - 1, Time: e.Time, Lost: lost, Resume: e.Seq,
				Text: fmt.Sprintf("… %d %s lost (no longer in the log); resuming at seq %d", lost, plural(lost, "line", "lines"), e.Seq)})
		}
		lw.buf.Write(lw.lines.line(e))
		lw.last = e.Seq
	}
}

// lineCache holds the NDJSON lines of a run's recent entries, so that
// every follower of a run writes the bytes one of them encoded: with a
// hundred followers, encoding is most of the cost of fan-out. Slots are
// indexed by seq and replaced without locks; a miss just encodes again.
type lineCache [lineCacheSlots]atomic.Pointer[cachedLine]

const lineCacheSlots = 4096

type cachedLine struct {
	seq  uint64
	line []byte // with its newline; never modified
}

// line returns e as an NDJSON entry line, newline included.
func (c *lineCache) line(e logring.Entry) []byte {
	slot := &c[e.Seq%lineCacheSlots]
	if p := slot.Load(); p != nil && p.seq == e.Seq {
		return p.line
	}
	b, err := json.Marshal(entryLine{Type: wire.LogLineEntry, Seq: e.Seq, Time: e.Time, Stream: string(e.Stream), Text: e.Text, Truncated: e.Truncated})
	if err != nil {
		panic(err) // the line types always encode
	}
	b = append(b, '\n')
	slot.Store(&cachedLine{seq: e.Seq, line: b})
	return b
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// flush writes what was added and flushes it to the client, under a
// write deadline.
func (lw *lineWriter) flush() error {
	if err := lw.rc.SetWriteDeadline(time.Now().Add(lw.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if lw.buf.Len() > 0 {
		_, err := lw.w.Write(lw.buf.Bytes())
		lw.buf.Reset()
		if err != nil {
			return err
		}
	}
	if err := lw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// logs answers GET /v1/runs/{id}/logs?after=SEQ&tail=N&follow=1 with
// application/x-ndjson: the selected history (entries after after, of
// which only the last tail), then either an "end" line, or, with follow,
// the live entries with heartbeats while idle and an "exit" line once the
// run has ended. Entries the log no longer holds are one gap line.
func (a *runsAPI) logs(w http.ResponseWriter, r *http.Request) error {
	p, err := parseLogsParams(r.URL.Query())
	if err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", wire.ContentNDJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	lw := &lineWriter{w: w, rc: http.NewResponseController(w), timeout: a.s.cfg.WriteTimeout, lines: a.lines(rn)}
	defer lw.rc.SetWriteDeadline(time.Time{})
	ctx := r.Context()

	// A cursor past the end (from a log that has since been deleted) would
	// wait for seqs that may never come: it starts at the end instead.
	last := rn.Ring().Last()
	since := min(p.after, last)
	if p.hasTail && last > uint64(p.tail) {
		since = max(since, last-uint64(p.tail))
	}
	lw.last = since
	if err := a.history(ctx, lw, rn, since, last); err != nil {
		return streamError{err}
	}
	if !p.follow {
		lw.add(status(wire.LogLineEnd, rn.Record(), lw.last))
		if err := lw.flush(); err != nil {
			return streamError{err}
		}
		return nil
	}
	if err := a.follow(ctx, lw, rn); err != nil {
		return streamError{err}
	}
	return nil
}

func status(typ string, rec store.Record, last uint64) statusLine {
	return statusLine{Type: typ, State: string(rec.State), ExitCode: rec.ExitCode, Error: rec.Error, LastSeq: last}
}

// history writes the entries after since up to until at least, a page at
// a time. Each page is read (ring, else store) into memory first and
// written after: nothing is held across a network write.
func (a *runsAPI) history(ctx context.Context, lw *lineWriter, rn *runs.Run, since, until uint64) error {
	for {
		es := rn.History(ctx, since)
		if len(es) == 0 {
			break
		}
		lw.entries(es)
		since = es[len(es)-1].Seq
		if err := lw.flush(); err != nil {
			return err
		}
		if since >= until {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return lw.flush() // the headers, when there was nothing to send
}

// follow streams the run's new entries as they come, a heartbeat when
// nothing came for a while, and the exit line once the run has ended and
// its log is drained. A follower that fell behind the ring is caught up
// from the store when it still holds the entries.
func (a *runsAPI) follow(ctx context.Context, lw *lineWriter, rn *runs.Run) error {
	cur := rn.Ring().Cursor(lw.last)
	beat := time.NewTicker(a.heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			lw.add(heartbeatLine{Type: wire.LogLineHeartbeat, Time: time.Now().Round(0), LastSeq: lw.last})
		case <-cur.Ready():
			batch, err := cur.Next(ctx)
			if errors.Is(err, io.EOF) {
				return a.exit(ctx, lw, rn)
			}
			if err != nil {
				return err
			}
			if batch[0].Gap != nil && a.s.runs.Persisted() {
				if err := a.history(ctx, lw, rn, lw.last, batch[len(batch)-1].Seq); err != nil {
					return err
				}
				cur = rn.Ring().Cursor(lw.last)
			} else {
				lw.entries(batch)
			}
			beat.Reset(a.heartbeat)
		}
		if err := lw.flush(); err != nil {
			return err
		}
	}
}

// exit writes the exit line of a run whose log has closed.
func (a *runsAPI) exit(ctx context.Context, lw *lineWriter, rn *runs.Run) error {
	select {
	case <-rn.Done(): // the record is final
	case <-ctx.Done():
		return ctx.Err()
	}
	lw.add(status(wire.LogLineExit, rn.Record(), lw.last))
	return lw.flush()
}

// changes tells waiters that flyd's status changed: sessions, runs,
// upstreams. It is a broadcast without per-waiter queues.
type changes struct {
	mu   sync.Mutex
	ch   chan struct{}
	done chan struct{}
}

func newChanges() *changes {
	return &changes{ch: make(chan struct{}), done: make(chan struct{})}
}

// wait returns a channel closed at the next change.
func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// bump wakes every waiter.
func (c *changes) bump() {
	c.mu.Lock()
	close(c.ch)
	c.ch = make(chan struct{})
	c.mu.Unlock()
}

// closed is closed when flyd stops: event streams end.
func (c *changes) closed() <-chan struct{} { return c.done }

func (c *changes) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}
