package runs

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
)

// Bounds of log reads.
const (
	// DefaultLimit bounds one page of Entries without a Limit.
	DefaultLimit = 500
	// maxLogScan bounds the entries one text page looks at for a grep.
	maxLogScan = 100_000
	// historyPage is how many entries History returns at most.
	historyPage = DefaultLimit
)

// Query selects entries of a run's log.
type Query struct {
	Since uint64         // entries after this seq
	Tail  int            // or only the last Tail entries (after Since)
	Grep  *regexp.Regexp // keep matching entries
	// Streams keeps the entries of these streams (all when empty).
	Streams []logring.Stream
	Limit   int // at most this many (default DefaultLimit)
}

// Page is the answer to a Query.
type Page struct {
	Entries     []logring.Entry // gap entries included
	First, Last uint64          // oldest and newest seq the log holds
	Next        uint64          // the Since of the next page
}

// Entries answers q from the ring, reaching into the store for entries
// the ring has already evicted. A stretch that neither holds any more is
// reported as one gap entry.
func (r *Run) Entries(q Query) Page {
	if q.Tail > 0 && (q.Grep != nil || len(q.Streams) > 0) {
		return r.tailSelected(q)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	page := Page{First: r.ring.First(), Last: r.ring.Last()}
	db := r.eng.db
	var stored store.LogMeta
	if db != nil {
		stored, _ = db.LogStats(r.id)
		if stored.FirstSeq != 0 && stored.FirstSeq < page.First {
			page.First = stored.FirstSeq
		}
	}
	since := q.Since
	if q.Tail > 0 && page.Last > uint64(q.Tail) && page.Last-uint64(q.Tail) > since {
		since = page.Last - uint64(q.Tail)
	}
	var out []logring.Entry
	// Older than the ring: read the store first, reporting any stretch it
	// no longer holds (trimmed, or dropped under load) as a gap.
	if ringFirst := r.ring.First(); db != nil && since+1 < ringFirst {
		// What the ring evicted a moment ago may still be queued for the
		// store: let it commit, so that it is not reported lost.
		r.settle(context.Background(), ringFirst-1)
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
	if sel := (Select{Grep: q.Grep, Streams: q.Streams}); sel.Grep != nil || len(sel.Streams) > 0 {
		out = slices.DeleteFunc(out, func(e logring.Entry) bool { return !sel.Keep(e) })
	}
	page.Next = since
	if len(out) > 0 {
		page.Next = out[len(out)-1].Seq
	}
	if page.Entries = out; out == nil {
		page.Entries = []logring.Entry{}
	}
	return page
}

// tailSelected answers a Query for the last Tail selected entries: it
// reads back from the end in growing windows until it has them, the log
// starts, or maxLogScan entries were read.
func (r *Run) tailSelected(q Query) Page {
	want := q.Tail
	if q.Limit > 0 {
		want = min(want, q.Limit)
	}
	sel := Select{Grep: q.Grep, Streams: q.Streams}
	for window := uint64(max(2*want, 64)); ; window *= 4 {
		last := r.ring.Last()
		since := q.Since
		if last > window && last-window > since {
			since = last - window
		}
		var kept []logring.Entry
		page := Page{Next: since}
		for from := since; ; {
			p := r.Entries(Query{Since: from, Limit: DefaultLimit})
			page.First, page.Last = p.First, p.Last
			for _, e := range p.Entries {
				if sel.Keep(e) {
					kept = append(kept, e)
				}
			}
			if len(p.Entries) == 0 || p.Next <= from || p.Next >= p.Last {
				page.Next = max(p.Next, from)
				break
			}
			from = p.Next
		}
		if len(kept) >= want || since == q.Since || window > maxLogScan {
			page.Entries = kept[max(0, len(kept)-want):]
			if page.Entries == nil {
				page.Entries = []logring.Entry{}
			}
			return page
		}
	}
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

// FormatEntry is one line of a log resource's text. The entry's text is
// the app's: its newlines and every control and format character are
// shown escaped, so one entry is one line and no text can pass for
// another entry.
func FormatEntry(e logring.Entry) string {
	return fmt.Sprintf("%d %s %s %s", e.Seq, e.Time.Format("15:04:05.000"), e.Stream, safetext.Line(e.Text))
}

// TextPage is a page of a log as text lines, within a byte budget.
type TextPage struct {
	Lines       []string // FormatEntry of each entry returned
	From, To    uint64   // seqs of the first and last entry returned
	First, Last uint64   // the oldest and newest seq the log holds
	Next        uint64   // the since that continues after this page
	Truncated   bool     // matching entries were left out
}

// scan calls fn for each entry after since, in order, in pages, until fn
// returns false, the log ends, ctx is done or maxLogScan entries were seen.
// It returns the log's bounds and the last seq it saw.
func (r *Run) scan(ctx context.Context, since uint64, fn func(logring.Entry) bool) (first, last, seen uint64) {
	seen = since
	for n := 0; n < maxLogScan && ctx.Err() == nil; {
		p := r.Entries(Query{Since: since, Limit: DefaultLimit})
		first, last = p.First, p.Last
		for _, e := range p.Entries {
			seen = e.Seq
			if !fn(e) {
				return first, last, seen
			}
		}
		n += len(p.Entries)
		if len(p.Entries) == 0 || p.Next <= since || p.Next >= p.Last {
			break
		}
		since = p.Next
	}
	return first, last, seen
}

// Select picks the entries of a page: those of its streams (all when
// none are named) whose text matches Grep (all when nil). Gap entries are
// always kept: a page says what it cannot show.
type Select struct {
	Grep    *regexp.Regexp
	Streams []logring.Stream
}

// Keep reports whether e is selected.
func (s Select) Keep(e logring.Entry) bool {
	if e.Gap != nil {
		return true
	}
	if len(s.Streams) > 0 && !slices.Contains(s.Streams, e.Stream) {
		return false
	}
	return s.Grep == nil || s.Grep.MatchString(e.Text)
}

// ForwardPage returns the entries after since, oldest first, as many as
// fit in budget (and at most max when max > 0).
func (r *Run) ForwardPage(ctx context.Context, since uint64, sel Select, budget, max int) TextPage {
	var pg TextPage
	used := 0
	pg.First, pg.Last, pg.Next = r.scan(ctx, since, func(e logring.Entry) bool {
		if !sel.Keep(e) {
			return true
		}
		line := FormatEntry(e)
		if used+len(line)+1 > budget || (max > 0 && len(pg.Lines) == max) {
			pg.Truncated = true
			return false
		}
		used += len(line) + 1
		pg.Lines = append(pg.Lines, line)
		if len(pg.Lines) == 1 {
			pg.From = e.Seq
		}
		pg.To = e.Seq
		return true
	})
	if pg.Truncated {
		pg.Next = pg.To
	}
	return pg
}

// BackwardPage returns the newest entries before before (0: the newest
// of all), as many as fit in budget (and at most max when max > 0), in
// order. It reads a window back from the end and widens it until the
// page is full or the log's start is reached.
func (r *Run) BackwardPage(ctx context.Context, before uint64, sel Select, budget, max int) TextPage {
	var pg TextPage
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
		pg.First, pg.Last, _ = r.scan(ctx, lo, func(e logring.Entry) bool {
			if e.Seq > upper {
				return false
			}
			if sel.Keep(e) {
				got = append(got, item{e.Seq, FormatEntry(e)})
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
		atStart := lo == 0 || lo < pg.First
		if full || atStart || window*4 > maxLogScan || ctx.Err() != nil {
			pg.Truncated = i > 0 || (!atStart && !full)
			for _, it := range got[i:] {
				pg.Lines = append(pg.Lines, it.line)
			}
			if len(got) > i {
				pg.From, pg.To = got[i].seq, got[len(got)-1].seq
			}
			pg.Next = upper
			return pg
		}
	}
}

// History returns the next entries after since, oldest first, for a
// stream that will print them all: from the ring
// while it holds them, else from the store. The ring's gap entry is
// returned only when the store does not hold the entries either; entries
// the store lacks in the middle (trimmed or dropped) are left for
// lineWriter.entries to report.
func (rn *Run) History(ctx context.Context, since uint64) []logring.Entry {
	db := rn.eng.db
	for attempt := 0; ; attempt++ {
		if first := rn.ring.First(); db != nil && since+1 < first {
			rn.settle(ctx, first-1)
			if old, err := db.Logs(rn.id, since, historyPage); err == nil && len(old) > 0 {
				return fromStore(old)
			}
		}
		// The ring may have moved on since First: then try the store again.
		es, gap := rn.ring.Since(since, historyPage)
		if gap == nil || db == nil || attempt == 2 {
			return es
		}
	}
}

// settle makes sure the store has committed the run's entries up to seq
// upto, which the ring no longer holds: the writer commits in groups, so
// what the ring evicted a moment ago may still be queued. It waits at most
// a second; a store that cannot keep up leaves a gap, as it would anyway.
func (rn *Run) settle(ctx context.Context, upto uint64) {
	db := rn.eng.db
	if db == nil {
		return
	}
	if st, err := db.LogStats(rn.id); err != nil || st.LastSeq >= upto {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = db.Flush(ctx)
}
