package mcpserver

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/store"
)

// Which run a tool works on. One rule for every run tool, said once in
// the server's instructions: a run_id left out means the newest live run
// of the session's workspace (a flutter run or an attached app: never a
// build, a one-shot command or the flutter attach flyd starts for an
// app); with none live, the tools that read (logs_read, flutter_errors)
// read the workspace's most recent run, and say what became of it, and
// the tools that act (reload, stop, claim, inspect) answer with the same
// line and what to do next. A run_id may be a unique prefix of one, as
// the short ids of runs_list are.

// use says whether a tool reads a run or acts on it.
type use bool

const (
	toRead use = true
	toAct  use = false
)

// appKind reports whether runs of kind are "the run" of a workspace: a
// flutter run or an attached app.
func appKind(k store.Kind) bool { return k == store.KindRun || k == store.KindApp }

// runFor returns the run id names (a run id or a unique prefix), or with
// no id the run the rule above picks for u.
func (t tools) runFor(sess *client, id string, u use) (*runs.Run, error) {
	if id != "" {
		return t.s.getRun(sess.ws.Root(), id)
	}
	root := sess.ws.Root()
	live := t.s.runs.LiveIDs(root, store.KindRun) // runs and attached apps, sorted: the newest last
	for i := len(live) - 1; i >= 0; i-- {
		if r, err := t.s.runs.Get(live[i]); err == nil && !hasEnded(r) {
			return r, nil
		}
	}
	rec, ok, err := t.s.mostRecent(root)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, errors.New("no run in this workspace yet: start the app with flutter_run (runs_list lists runs and builds)")
	case u == toAct:
		r, err := t.s.runs.Get(rec.ID)
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no live run in this workspace: %s; %s", endLine(r, time.Now()), nextStep(r.Record()))
	}
	return t.s.runs.Get(rec.ID)
}

// hasEnded reports whether r's record is final: its process has exited
// (or its app is gone) and how it ended is known, though the engine may
// still be writing its log to disk, until when it counts as live.
func hasEnded(r *runs.Run) bool { return !r.Record().State.Live() }

// mostRecent is the record of the most recent flutter run or attached
// app of root: a live one, else the one that ended last.
func (s *Server) mostRecent(root string) (store.Record, bool, error) {
	recs, err := s.runs.List(root)
	if err != nil {
		return store.Record{}, false, err
	}
	rec, ok := mostRecentOf(recs)
	return rec, ok, nil
}

// mostRecentOf is mostRecent of recs, newest first as List gives them.
func mostRecentOf(recs []store.Record) (store.Record, bool) {
	var best store.Record
	var bestAt time.Time
	found := false
	for _, rec := range recs {
		if !appKind(rec.Kind) {
			continue
		}
		if rec.State.Live() {
			return rec, true
		}
		at := rec.EndedAt
		if at.IsZero() {
			at = rec.StartedAt
		}
		if !found || at.After(bestAt) {
			best, bestAt, found = rec, at, true
		}
	}
	return best, found
}

// minPrefix is the shortest run id prefix a tool resolves; runIDLen is
// the length of a whole id (store.NewRunID).
const (
	minPrefix = 4
	runIDLen  = 18
)

// getRun returns the run id names: a run id, or a prefix of one (at
// least minPrefix characters) that names one run of root, else one run
// of any workspace.
func (s *Server) getRun(root, id string) (*runs.Run, error) {
	r, err := s.runs.Get(id)
	if err == nil || !errors.Is(err, runs.ErrNoSuchRun) || len(id) < minPrefix || len(id) >= runIDLen {
		return r, err
	}
	recs, lerr := s.runs.List("")
	if lerr != nil {
		return nil, err
	}
	var all, here []string
	for _, rec := range recs {
		if strings.HasPrefix(rec.ID, id) {
			all = append(all, rec.ID)
			if rec.Root == root {
				here = append(here, rec.ID)
			}
		}
	}
	switch {
	case len(all) == 1:
		return s.runs.Get(all[0])
	case len(here) == 1:
		return s.runs.Get(here[0])
	case len(all) == 0:
		return nil, err
	}
	ids := all[:min(len(all), 4)]
	return nil, fmt.Errorf("run_id %q is the start of several runs' ids (%s): give more of it (runs_list)", id, strings.Join(ids, ", "))
}

// shortIDLen is the shortest id runs_list shows: 7 characters of an id
// are its creation time to about half a minute.
const shortIDLen = 7

// shortIDs gives each of ids the shortest prefix, at least shortIDLen
// long, that no other of ids starts with.
func shortIDs(ids []string) map[string]string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	out := make(map[string]string, len(ids))
	for i, id := range sorted {
		n := shortIDLen
		for _, j := range []int{i - 1, i + 1} { // the neighbours share the longest prefixes
			if j >= 0 && j < len(sorted) && sorted[j] != id {
				n = max(n, commonPrefix(id, sorted[j])+1)
			}
		}
		out[id] = id[:min(n, len(id))]
	}
	return out
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// ended is what became of a run that is no longer live, in a word:
// stopped, exited, crashed (it failed after its app had started),
// failed, cancelled, interrupted; detached or ended for an attached app.
func ended(rec store.Record) string {
	if rec.Kind == store.KindApp {
		switch rec.State {
		case store.StateStopped:
			return "was detached"
		case store.StateExited:
			return "ended"
		}
	}
	switch rec.State {
	case store.StateFailed:
		if runs.Crashed(rec) {
			return "crashed"
		}
		return "failed"
	case store.StateCancelled, store.StateInterrupted:
		return "was " + string(rec.State)
	}
	return string(rec.State)
}

// endLine says what became of a run in one line: `run 01jq3v6 crashed
// 2s ago: exit 255, "Lost connection to device."`: how it ended, when,
// its exit code, who stopped it, and the last error line flutter printed
// (made safe to show). A live run is "running" or "starting".
func endLine(r *runs.Run, now time.Time) string {
	rec := r.Record()
	name := kindNoun(rec.Kind) + " " + r.ID()
	if rec.State.Live() {
		return name + " is " + string(rec.State)
	}
	var b strings.Builder
	b.WriteString(name + " " + ended(rec))
	if !rec.EndedAt.IsZero() {
		b.WriteString(" " + ago(now.Sub(rec.EndedAt)))
	}
	if a := rec.LastAction; a != nil && a.What == "stop" && rec.State == store.StateStopped {
		b.WriteString(" by " + safetext.Line(a.By.Name()))
	}
	var why []string
	if rec.ExitCode != nil && *rec.ExitCode >= 0 {
		why = append(why, "exit "+strconv.Itoa(*rec.ExitCode))
	}
	switch rec.State {
	case store.StateFailed:
		if l := r.LastError(); l != "" {
			why = append(why, `"`+safetext.Line(l)+`"`)
		} else if rec.Error != "" {
			why = append(why, safetext.Line(rec.Error))
		}
	case store.StateCancelled:
		why = append(why, safetext.Line(rec.Error))
	case store.StateInterrupted:
		if rec.Error != "" {
			why = append(why, safetext.Line(rec.Error))
		} else {
			why = append(why, "flyd stopped while it ran")
		}
	}
	if len(why) > 0 {
		b.WriteString(": " + strings.Join(why, ", "))
	}
	return b.String()
}

// kindNoun names a run of kind in a sentence.
func kindNoun(k store.Kind) string {
	switch k {
	case store.KindBuild:
		return "build"
	case store.KindTool:
		return "command"
	case store.KindApp:
		return "app"
	case store.KindUpstream:
		return "upstream"
	}
	return "run"
}

// nextStep is what an agent can do about a run that has ended.
func nextStep(rec store.Record) string {
	switch {
	case rec.Kind == store.KindApp:
		return "attach to an app again with flutter_run attach (runs_list lists the apps)"
	case rec.State == store.StateFailed:
		return "logs_read and flutter_errors tell why; start it again with flutter_run"
	}
	return "start it again with flutter_run"
}

// ago is a duration past, as people say it: "just now", "2s ago", "5m
// ago", "3h ago", "2d ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}
