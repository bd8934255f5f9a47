package daemon

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logUpdateEvery coalesces resources/updated of one log URI.
const logUpdateEvery = 50 * time.Millisecond

// defaultLogLimit bounds one page of a log read; maxLogRead bounds one
// resources/read of a log.
const (
	defaultLogLimit = 500
	maxLogRead      = 5000
)

// logURI names the log of a run: logs://run/{id} or logs://build/{id}
// (builds and one-shot commands).
func logURI(kind store.Kind, id string) string {
	if kind == store.KindRun {
		return "logs://run/" + id
	}
	return "logs://build/" + id
}

// parseLogURI splits a log URI into its kind ("run" or "build"), run id
// and query.
func parseLogURI(uri string) (kind, id string, q url.Values, err error) {
	u, perr := url.Parse(uri)
	if perr != nil || u.Scheme != "logs" || (u.Host != "run" && u.Host != "build") {
		return "", "", nil, invalidParams("%q is not a logs://run/{id} or logs://build/{id} URI", uri)
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

// logQuery selects entries of a run's log.
type logQuery struct {
	since uint64         // entries after this seq
	tail  int            // or only the last tail entries (after since)
	grep  *regexp.Regexp // keep matching entries
	limit int            // at most this many (default defaultLogLimit)
}

// logPage is the answer to a logQuery.
type logPage struct {
	entries     []logring.Entry // gap entries included
	first, last uint64          // oldest and newest seq the log holds
	next        uint64          // the since of the next page
}

// entries answers q from the ring, reaching into the store for entries
// the ring has already evicted. A stretch that neither holds any more is
// reported as one gap entry.
func (r *run) entries(q logQuery) logPage {
	limit := q.limit
	if limit <= 0 {
		limit = defaultLogLimit
	}
	page := logPage{first: r.ring.First(), last: r.ring.Last()}
	db := r.eng.db
	var stored store.LogMeta
	if db != nil {
		stored, _ = db.LogStats(r.id)
		if stored.FirstSeq != 0 && stored.FirstSeq < page.first {
			page.first = stored.FirstSeq
		}
	}
	since := q.since
	if q.tail > 0 && page.last > uint64(q.tail) && page.last-uint64(q.tail) > since {
		since = page.last - uint64(q.tail)
	}
	var out []logring.Entry
	// Older than the ring: read the store first, reporting any stretch it
	// no longer holds (trimmed, or dropped under load) as a gap.
	if ringFirst := r.ring.First(); db != nil && since+1 < ringFirst {
		if old, err := db.Logs(r.id, since, limit); err == nil {
			expect := since + 1
			for _, e := range old {
				if e.Seq >= ringFirst || len(out) >= limit {
					break
				}
				if e.Seq > expect {
					out = append(out, gapEntry(expect, e.Seq))
				}
				out = append(out, fromStore([]store.Entry{e})...)
				expect = e.Seq + 1
			}
			since = expect - 1
		}
	}
	// The ring reports a gap itself when since is still before its start.
	if len(out) < limit {
		ring, _ := r.ring.Since(since, limit-len(out))
		out = append(out, ring...)
	}
	if q.grep != nil {
		kept := out[:0]
		for _, e := range out {
			if e.Gap != nil || q.grep.MatchString(e.Text) {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	page.next = since
	if len(out) > 0 {
		page.next = out[len(out)-1].Seq
	}
	if page.entries = out; out == nil {
		page.entries = []logring.Entry{}
	}
	return page
}

// gapEntry stands for the entries from..resume-1 that are gone, in the
// form logring uses: Seq is resume-1, so a reader resumes after it.
func gapEntry(from, resume uint64) logring.Entry {
	lost := resume - from
	return logring.Entry{
		Seq: resume - 1, Time: time.Now(), Stream: logring.Fly,
		Text: fmt.Sprintf("… %d lines lost (no longer kept); resuming at seq %d", lost, resume),
		Gap:  &logring.Gap{Lost: lost, Resume: resume},
	}
}

// formatEntry is one line of a log resource's text.
func formatEntry(e logring.Entry) string {
	return fmt.Sprintf("%d %s %s %s", e.Seq, e.Time.Format("15:04:05.000"), e.Stream, e.Text)
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
	var q logQuery
	var rng byteRange
	for k, vs := range qv {
		n, perr := strconv.ParseInt(vs[0], 10, 64)
		if len(vs) != 1 || perr != nil || n < 0 {
			return nil, invalidParams("query parameter %s=%q is not a non-negative integer", k, vs[0])
		}
		switch k {
		case "since":
			q.since = uint64(n)
		case "tail":
			q.tail = int(n)
		case "start":
			rng.start, rng.hasStart = n, true
		case "length":
			rng.length, rng.hasLength = n, true
		default:
			return nil, invalidParams("unknown query parameter %q; a log URI takes since, tail, start and length", k)
		}
	}
	r, err := s.runs.get(id)
	if err != nil {
		return nil, notFound(uri, err.Error())
	}
	// Page through what was asked for, up to maxLogRead entries; _meta's
	// next_since continues a longer log.
	var b strings.Builder
	page := logPage{next: q.since}
	for n := 0; n < maxLogRead; {
		q.limit = min(defaultLogLimit, maxLogRead-n)
		p := r.entries(q)
		for _, e := range p.entries {
			b.WriteString(formatEntry(e))
			b.WriteByte('\n')
		}
		n += len(p.entries)
		page.first, page.last, page.next = p.first, p.last, p.next
		page.entries = append(page.entries, p.entries...)
		if len(p.entries) == 0 || p.next >= p.last {
			break
		}
		q.since, q.tail = p.next, 0
	}
	text := b.String()
	total := int64(len(text))
	start := min(rng.start, total)
	end := total
	if rng.hasLength {
		end = min(total, start+rng.length)
	}
	rec := r.record()
	meta := mcp.Meta{
		"first_seq": page.first, "last_seq": page.last, "entries": len(page.entries), "next_since": page.next,
		"total": total, "start": start, "length": end - start, "state": string(rec.State),
	}
	if db := r.eng.db; db != nil {
		if st, err := db.LogStats(r.id); err == nil {
			meta["stored_seq"] = st.LastSeq // what is on disk: survives a crash of flyd
		}
	}
	return &mcp.ReadResourceResult{
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text[start:end]}},
		Meta:     meta,
	}, nil
}

// logResources lists the logs of the runs of root, newest first.
func (s *Server) logResources(root string) []*mcp.Resource {
	recs, err := s.runs.list(root)
	if err != nil {
		s.log.Warn("list runs", logErr, err)
		return nil
	}
	out := make([]*mcp.Resource, 0, len(recs))
	for _, rec := range recs {
		out = append(out, &mcp.Resource{
			URI:         logURI(rec.Kind, rec.ID),
			Name:        "log-" + rec.ID,
			Title:       fmt.Sprintf("%s log: %s (%s)", rec.Kind, strings.Join(rec.Argv, " "), rec.State),
			MIMEType:    "text/plain",
			Description: "One line per entry: seq, time, stream (stdout, stderr, event or fly), text. Query: ?since=SEQ, ?tail=N, ?start=&length=.",
			Annotations: &mcp.Annotations{LastModified: rec.StartedAt.UTC().Format(time.RFC3339)},
		})
	}
	return out
}

// runChanged is the runs engine's hook, called at every state change of
// a run. A run that appears or ends changes the resource list (its log,
// and the state in its title) of the sessions of its workspace, and only
// of those: each is told once when it starts and once when it ends, not
// at every state in between. A live run's log gets a notifier.
func (s *Server) runChanged(r *run) {
	live := r.record().State.Live()
	s.mu.Lock()
	_, known := s.notifying[r.id]
	if !known && live {
		s.notifying[r.id] = true
		s.notifyWG.Add(1)
		go func() { // owned by the server: ends when the run's ring closes
			defer s.notifyWG.Done()
			s.followLog(r)
		}()
	}
	wasLive, listed := s.listed[r.id]
	announce := !listed || wasLive != live
	if live {
		s.listed[r.id] = true
	} else {
		delete(s.listed, r.id)
	}
	var sessions []*session
	if announce {
		for _, sess := range s.sessions {
			if sess.ws.root == r.root {
				sessions = append(sessions, sess)
			}
		}
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		if sess.ready() {
			s.notify(sess, "notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

// followLog tells subscribers of r's log that it grew, at most once per
// logUpdateEvery, until the run's ring is closed.
func (s *Server) followLog(r *run) {
	uri := logURI(r.kind, r.id)
	seen := r.ring.Last()
	for {
		<-r.ring.Wait(seen)
		closed := r.ring.Closed()
		seen = r.ring.Last()
		s.mu.Lock()
		var subs []*session
		for _, sess := range s.sessions {
			if sess.subscribed(uri) {
				subs = append(subs, sess)
			}
		}
		s.mu.Unlock()
		for _, sess := range subs {
			s.notify(sess, "notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
		if closed {
			s.mu.Lock()
			delete(s.notifying, r.id)
			s.mu.Unlock()
			return
		}
		time.Sleep(logUpdateEvery)
	}
}

// logTextPage is a page of a log as text lines, within a byte budget.
type logTextPage struct {
	lines       []string
	from, to    uint64 // seqs of the first and last entry returned
	first, last uint64 // the oldest and newest seq the log holds
	next        uint64 // the since that continues after this page
	truncated   bool   // matching entries were left out
}

// scan calls fn for each entry after since, in order, in pages, until fn
// returns false, the log ends, ctx is done or maxLogScan entries were seen.
// It returns the log's bounds and the last seq it saw.
func (r *run) scan(ctx context.Context, since uint64, fn func(logring.Entry) bool) (first, last, seen uint64) {
	seen = since
	for n := 0; n < maxLogScan && ctx.Err() == nil; {
		p := r.entries(logQuery{since: since, limit: defaultLogLimit})
		first, last = p.first, p.last
		for _, e := range p.entries {
			seen = e.Seq
			if !fn(e) {
				return first, last, seen
			}
		}
		n += len(p.entries)
		if len(p.entries) == 0 || p.next <= since || p.next >= p.last {
			break
		}
		since = p.next
	}
	return first, last, seen
}

func matches(grep *regexp.Regexp, e logring.Entry) bool {
	return grep == nil || e.Gap != nil || grep.MatchString(e.Text)
}

// forwardPage returns the entries after since, oldest first, as many as
// fit in budget (and at most max when max > 0).
func (r *run) forwardPage(ctx context.Context, since uint64, grep *regexp.Regexp, budget, max int) logTextPage {
	var pg logTextPage
	used := 0
	pg.first, pg.last, pg.next = r.scan(ctx, since, func(e logring.Entry) bool {
		if !matches(grep, e) {
			return true
		}
		line := formatEntry(e)
		if used+len(line)+1 > budget || (max > 0 && len(pg.lines) == max) {
			pg.truncated = true
			return false
		}
		used += len(line) + 1
		pg.lines = append(pg.lines, line)
		if len(pg.lines) == 1 {
			pg.from = e.Seq
		}
		pg.to = e.Seq
		return true
	})
	if pg.truncated {
		pg.next = pg.to
	}
	return pg
}

// backwardPage returns the newest entries before before (0: the newest
// of all), as many as fit in budget (and at most max when max > 0), in
// order. It reads a window back from the end and widens it until the
// page is full or the log's start is reached.
func (r *run) backwardPage(ctx context.Context, before uint64, grep *regexp.Regexp, budget, max int) logTextPage {
	var pg logTextPage
	upper := r.ring.Last()
	if before > 0 {
		upper = min(upper, before-1)
	}
	type item struct {
		seq  uint64
		line string
	}
	for window := uint64(256); ; window *= 4 {
		lo := uint64(0)
		if upper > window {
			lo = upper - window
		}
		var got []item
		pg.first, pg.last, _ = r.scan(ctx, lo, func(e logring.Entry) bool {
			if e.Seq > upper {
				return false
			}
			if matches(grep, e) {
				got = append(got, item{e.Seq, formatEntry(e)})
			}
			return true
		})
		// Keep the newest that fit.
		used, i := 0, len(got)
		for i > 0 && (max <= 0 || len(got)-i < max) && used+len(got[i-1].line)+1 <= budget {
			used += len(got[i-1].line) + 1
			i--
		}
		full := i > 0 || (max > 0 && len(got) >= max)
		atStart := lo == 0 || lo < pg.first
		if full || atStart || window*4 > maxLogScan || ctx.Err() != nil {
			pg.truncated = i > 0 || (!atStart && !full)
			for _, it := range got[i:] {
				pg.lines = append(pg.lines, it.line)
			}
			if len(got) > i {
				pg.from, pg.to = got[i].seq, got[len(got)-1].seq
			}
			pg.next = upper
			return pg
		}
	}
}
