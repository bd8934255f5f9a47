package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/runs"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// runsReply is the body of GET /v1/runs.
type runsReply = wire.RunsReply[wire.Run, wire.App]

// list answers GET /v1/runs: the runs of every workspace (all=1 is the
// default here), or of root=/abs, newest first.
func (a *API) list(w http.ResponseWriter, r *http.Request) error {
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
	infos, err := a.cfg.Runs.Infos(root)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	roots := make([]string, 0, len(infos))
	for _, r := range infos {
		roots = append(roots, r.Root)
	}
	reply := runsReply{Runs: infos, Apps: []wire.App{}, Projects: projectNames(roots)}
	if a.cfg.Apps != nil {
		reply.Apps = a.cfg.Apps(root)
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

// find returns the run named by the request path.
func (a *API) find(r *http.Request) (*runs.Run, error) {
	id := r.PathValue("id")
	rn, err := a.cfg.Runs.Get(id)
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
func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rn.Info())
	return nil
}

// stop answers POST /v1/runs/{id}/stop: app.stop, SIGTERM, SIGKILL, as
// flutter_stop does, then the run's final state. Stopping an ended run
// just returns it. A client that hangs up does not cut the stop short
// (that would skip the graceful steps): it is bounded by the grace periods.
func (a *API) stop(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), "force"); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	if err := rn.StopAs(context.WithoutCancel(r.Context()), act(r)); err != nil {
		if claimed := (*runs.ClaimedError)(nil); errors.As(err, &claimed) {
			return &apiError{code: http.StatusConflict, msg: err.Error()}
		}
		return fmt.Errorf("stop run %s: %w", rn.ID(), err)
	}
	writeJSON(w, http.StatusOK, rn.Info())
	return nil
}

// act is who asks, as runs record it: flyctl sends its version header, a
// browser (the dashboard) does not. ?force=1 overrides a claim.
func act(r *http.Request) runs.Act {
	client := "dashboard"
	if r.Header.Get(wire.HeaderVersion) != "" {
		client = "flyctl"
	}
	return runs.Act{By: store.Actor{Client: client}, Force: r.URL.Query().Get("force") == "1"}
}

// reload answers POST /v1/runs/{id}/reload[?full=1]: a hot reload (or
// restart) as flutter_hot_reload does, with flutter's answer.
func (a *API) reload(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r.URL.Query(), "full", "force"); err != nil {
		return err
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	res, err := rn.Restart(r.Context(), r.URL.Query().Get("full") == "1", act(r))
	if err != nil {
		return &apiError{code: http.StatusConflict, msg: err.Error()}
	}
	newErrors := []string{}
	for _, e := range res.Errors {
		newErrors = append(newErrors, e.Line())
	}
	writeJSON(w, http.StatusOK, wire.ReloadResult{Code: res.Code, Message: res.Message, Applied: res.Applied(), Rejected: res.Rejected,
		Summary: res.Summary(), CompileOutput: res.Stderr, NewErrors: newErrors})
	return nil
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
// It is bounded in bytes, not only in lines: a line over lineCacheMaxLine
// (an app may print 8 KiB lines, and JSON may escape each byte six
// times) is encoded for each follower and never kept, so a followed run
// keeps at most about lineCacheSlots×lineCacheMaxLine, about a ring's
// worth of entries.
type lineCache [lineCacheSlots]atomic.Pointer[cachedLine]

const (
	lineCacheSlots   = 1024 // the ring's default entries, rounded up
	lineCacheMaxLine = 1 << 10
)

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
	if len(b) <= lineCacheMaxLine {
		slot.Store(&cachedLine{seq: e.Seq, line: b})
	}
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
func (a *API) logs(w http.ResponseWriter, r *http.Request) error {
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
	lw := &lineWriter{w: w, rc: http.NewResponseController(w), timeout: a.cfg.WriteTimeout, lines: a.lines(rn)}
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
	return statusLine{Type: typ, State: string(rec.State), Crashed: runs.Crashed(rec), ExitCode: rec.ExitCode, Error: rec.Error, LastSeq: last}
}

// history writes the entries after since up to until at least, a page at
// a time. Each page is read (ring, else store) into memory first and
// written after: nothing is held across a network write.
func (a *API) history(ctx context.Context, lw *lineWriter, rn *runs.Run, since, until uint64) error {
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
func (a *API) follow(ctx context.Context, lw *lineWriter, rn *runs.Run) error {
	cur := rn.Ring().Cursor(lw.last)
	beat := time.NewTicker(a.cfg.Heartbeat)
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
			if batch[0].Gap != nil && a.cfg.Runs.Persisted() {
				if err := a.history(ctx, lw, rn, lw.last, batch[len(batch)-1].Seq); err != nil {
					return err
				}
				cur = rn.Ring().Cursor(lw.last)
			} else {
				lw.entries(batch)
			}
			beat.Reset(a.cfg.Heartbeat)
		}
		if err := lw.flush(); err != nil {
			return err
		}
	}
}

// exit writes the exit line of a run whose log has closed.
func (a *API) exit(ctx context.Context, lw *lineWriter, rn *runs.Run) error {
	select {
	case <-rn.Done(): // the record is final
	case <-ctx.Done():
		return ctx.Err()
	}
	lw.add(status(wire.LogLineExit, rn.Record(), lw.last))
	return lw.flush()
}

// lines returns the cache of encoded log lines of rn, shared by all its
// followers; RunChanged drops it when the run ends.
func (a *API) lines(rn *runs.Run) *lineCache {
	if c, ok := a.lineCaches.Load(rn.ID()); ok {
		return c.(*lineCache)
	}
	c, _ := a.lineCaches.LoadOrStore(rn.ID(), new(lineCache))
	return c.(*lineCache)
}
