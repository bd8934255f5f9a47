package apperrors

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/safetext"
)

// Entry is one distinct error of a reload generation.
type Entry struct {
	ID         uint64 // increasing, stable: names the entry
	Rev        uint64 // the list's revision when it last changed: the cursor
	Generation int    // reloads and restarts before it
	Count      int
	FirstSeen  time.Time
	LastSeen   time.Time
	Error
}

// Line is the entry in one compact line:
// "3× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/home.dart:30:12".
// It starts with the count, 1 included, so that no text of the app's
// opens a line where it could pass for fly's ("Meanwhile:") or for
// markdown ("# …").
func (e Entry) Line() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.Count) + "× ")
	b.WriteString(e.Summary)
	switch {
	case e.Widget != "" && e.Location != "":
		b.WriteString(" — " + e.Widget + " at " + e.Location)
	case e.Location != "":
		b.WriteString(" — at " + e.Location)
	}
	if e.Frame != "" && e.Frame != e.Location {
		b.WriteString(" (thrown at " + e.Frame + ")")
	}
	return b.String()
}

// Limits bound a List. The zero value of a field means its default.
type Limits struct {
	Entries int // distinct entries kept (default 200)
	Bytes   int // bytes of text kept (default 256 KiB)
}

// List is the errors of one run. Its methods may be called concurrently.
type List struct {
	lim Limits

	mu         sync.Mutex
	entries    []*Entry // oldest first
	bytes      int
	next       uint64
	rev        uint64        // bumped by every Add
	changed    chan struct{} // closed and replaced by every Add
	generation int
	dropped    int // entries dropped for the bounds
	total      int // errors reported, repeats included
}

// NewList returns an empty list bounded by lim.
func NewList(lim Limits) *List {
	if lim.Entries <= 0 {
		lim.Entries = 200
	}
	if lim.Bytes <= 0 {
		lim.Bytes = 256 << 10
	}
	return &List{lim: lim, changed: make(chan struct{})}
}

// Changed returns a channel that is closed at the next Add: a follower
// waits on it, then reads, and never holds up the app's errors.
func (l *List) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Rev is the list's revision: pass it as Read's since to read only what
// changes after now.
func (l *List) Rev() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Reloaded starts a new generation: the app was hot reloaded or
// restarted, and the same error again is news.
func (l *List) Reloaded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.generation++
}

// Generation is the current generation.
func (l *List) Generation() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.generation
}

// Add records e seen at t and returns its entry (a copy) and whether it is
// new. The same error again in the same generation (same summary and
// location), or a repeat of a summary, counts on the entry it repeats.
func (l *List) Add(e Error, t time.Time) (Entry, bool) {
	e = e.safe()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	l.rev++
	close(l.changed)
	l.changed = make(chan struct{})
	for i := len(l.entries) - 1; i >= 0; i-- {
		x := l.entries[i]
		if x.Generation != l.generation {
			break
		}
		if x.Summary == e.Summary && (e.Repeat || x.Location == e.Location) {
			x.Count++
			x.LastSeen = t
			x.Rev = l.rev
			return *x, false
		}
	}
	l.next++
	x := &Entry{ID: l.next, Rev: l.rev, Generation: l.generation, Count: 1, FirstSeen: t, LastSeen: t, Error: e}
	l.entries = append(l.entries, x)
	l.bytes += size(x)
	for len(l.entries) > 1 && (len(l.entries) > l.lim.Entries || l.bytes > l.lim.Bytes) {
		l.bytes -= size(l.entries[0])
		l.entries = l.entries[1:]
		l.dropped++
	}
	return *x, true
}

// safe is e made safe to show wherever it is shown (tool results,
// resources, flyctl, the dashboard): the one-line fields with every
// control and format character escaped (newlines too), the text with its
// lines kept and each line so escaped; each within its bound.
func (e Error) safe() Error {
	line := func(s string, n int) string { return safetext.Cut(safetext.Line(safetext.Cut(s, 4*n)), n) }
	e.Library = line(e.Library, maxField)
	e.Summary = line(e.Summary, maxSummary)
	e.Widget = line(e.Widget, maxField)
	e.Location = line(e.Location, maxField)
	e.Frame = line(e.Frame, maxField)
	e.Text = safetext.Cut(safetext.Lines(safetext.Cut(e.Text, 4*maxText)), maxText)
	return e
}

func size(e *Entry) int {
	return len(e.Summary) + len(e.Text) + len(e.Widget) + len(e.Location) + len(e.Frame) + 64
}

// Stats are a list's counts.
type Stats struct {
	Entries    int // kept
	Current    int // kept entries of the current generation
	Total      int // errors reported, repeats included
	Dropped    int // entries dropped for the bounds
	Generation int
}

// Stats returns the list's counts.
func (l *List) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Entries: len(l.entries), Total: l.total, Dropped: l.dropped, Generation: l.generation}
	for _, e := range l.entries {
		if e.Generation == l.generation {
			s.Current++
		}
	}
	return s
}

// Page is what Read returns.
type Page struct {
	Entries []Entry // newest first
	Text    string  // one line each, newest first, within the budget
	More    bool    // entries were left out for the budget
	Next    uint64  // pass as since to read only what comes after this page
}

// Read returns the entries that changed after revision since (0 for
// all): new ones and those seen again. Only those of the current
// generation unless all is set; the most recently seen first, with their
// lines within budget bytes of text.
func (l *List) Read(since uint64, all bool, budget int) Page {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Page{Next: l.rev}
	var b strings.Builder
	order := make([]*Entry, 0, len(l.entries))
	for _, e := range l.entries {
		if e.Rev > since && (all || e.Generation == l.generation) {
			order = append(order, e)
		}
	}
	slices.SortFunc(order, func(a, b *Entry) int { return cmp.Compare(b.Rev, a.Rev) })
	for _, e := range order {
		line := e.Line()
		if b.Len()+len(line)+1 > budget && len(p.Entries) > 0 {
			p.More = true
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
		p.Entries = append(p.Entries, *e)
	}
	p.Text = b.String()
	if p.More {
		p.Text += fmt.Sprintf("… older errors left out (%d kept in all)\n", len(l.entries))
	}
	return p
}
