package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// runInfo is a run as flyd's HTTP API reports it.
type runInfo = wire.Run

// shownState is a run's state as a person reads it: a failed run whose
// app had started "crashed" (flyd says which).
func shownState(state string, crashed bool) string {
	if crashed {
		return "crashed"
	}
	return state
}

// runFailed reports whether an ended run counts as a failure for
// --exit-status: it failed, was interrupted, or exited non-zero.
func runFailed(state string, exitCode *int) bool {
	return state == wire.RunFailed || state == wire.RunInterrupted || state == wire.RunCancelled || (exitCode != nil && *exitCode != 0)
}

// outcome describes how a run ended (or that it has not): "exited (exit
// code 0)", "interrupted", "failed (exit code 1): no device".
func outcome(state string, exitCode *int, errMsg string) string {
	s := state
	if exitCode != nil {
		code := fmt.Sprintf("exit code %d", *exitCode)
		s += " (" + code + ")"
		if errMsg == code {
			errMsg = "" // flyd's error for a non-zero exit says no more
		}
	}
	if errMsg != "" {
		s += ": " + errMsg
	}
	return s
}

// resolveRun finds the run named by id, a run id or a unique prefix of
// one, the way docker resolves container ids.
func resolveRun(ctx context.Context, lc *localclient.Client, id string) (runInfo, error) {
	r, err := lc.Run(ctx, id)
	if err == nil {
		return *r, nil
	}
	if !localclient.IsNotFound(err) {
		return runInfo{}, err
	}
	l, lerr := lc.Runs(ctx)
	if lerr != nil {
		return runInfo{}, lerr
	}
	var matches []runInfo
	for _, r := range l.Runs {
		if strings.HasPrefix(r.RunID, id) {
			matches = append(matches, r)
		}
	}
	switch len(matches) {
	case 0:
		return runInfo{}, err
	case 1:
		return matches[0], nil
	}
	ids := make([]string, 0, 4)
	for _, m := range matches[:min(len(matches), 4)] {
		ids = append(ids, m.RunID)
	}
	more := ""
	if len(matches) > len(ids) {
		more = fmt.Sprintf(" and %d more", len(matches)-len(ids))
	}
	return runInfo{}, fmt.Errorf("run %q is ambiguous: it is a prefix of %s%s; give more of the id", id, strings.Join(ids, ", "), more)
}

// inWorkspace reports whether dir is root or lies under it.
func inWorkspace(root, dir string) bool {
	if root == "" || dir == "" {
		return false
	}
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// currentDir is the working directory with symlinks resolved, as flyd
// keys workspaces; "" when it cannot be found.
func currentDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(wd); err == nil {
		return r
	}
	return wd
}

// runsAbout is what flyctl runs --help says it does.
const runsAbout = `Lists the flutter runs and builds that flyd knows of, newest first: by
default those of the workspace that contains the current directory (or
--workspace DIR), plus every live one elsewhere; --all lists every run
flyd keeps, one-shot tools (devices, doctor, create) included (it keeps
the last 100 finished ones for a week by default). The columns:
  STATE    starting, running; once ended: stopped, exited (code 0),
           failed (did not start, exited non-zero, or timed out), crashed
           (failed after the app had started), cancelled or interrupted
  EXIT     the exit code of a run that has ended (- while it runs)
  ERRORS   the app's framework errors (a flutter run's): how many distinct
           ones since its last hot reload or restart, then, when it
           differs, how many times it reported any in all, repeats and
           older ones included: "2 (17×)" (flyctl errors RUN lists them)
  STARTED  relative on a terminal, RFC 3339 otherwise
  BY       the MCP client that started it, as it names itself (flyd for
           an upstream server it runs)
A claim on a live run, and the last thing a client did to it, follow
the table. --json prints {"runs": [...]} with flyd's run records (a
crashed run's state is "failed", with "crashed": true); their fields may
grow but never change meaning.`

type runsOptions struct {
	all       bool
	workspace string
	json      bool
}

func (o *runsOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.all, "all", false, "list the runs of every workspace, live or not")
	fs.StringVar(&o.workspace, "workspace", "", "list the runs of the workspace containing `DIR` (default: the current directory)")
	fs.BoolVar(&o.json, "json", false, "print the runs as JSON")
}

func cmdRuns(ctx context.Context, c *call, o *runsOptions) error {
	if len(c.args) > 0 {
		return usagef("runs takes no arguments, got %q (to see one run's log: flyctl logs tail RUN)", c.args)
	}
	if o.all && o.workspace != "" {
		return usagef("runs: --all and --workspace cannot be combined")
	}
	dir := currentDir()
	if o.workspace != "" {
		abs, err := filepath.Abs(o.workspace)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return usagef("runs: --workspace: %v", err)
		}
		dir = abs
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	l, err := lc.Runs(ctx)
	if err != nil {
		return err
	}
	sel := o.selected(l, dir)
	runs, apps := sel.Runs, sel.Apps
	if o.json {
		b, err := json.Marshal(struct {
			Runs []json.RawMessage `json:"runs"`
			Apps []json.RawMessage `json:"apps"`
		}{Runs: append([]json.RawMessage{}, sel.RawRuns...), Apps: append([]json.RawMessage{}, sel.RawApps...)})
		if err != nil {
			return err
		}
		return writeIndentedJSON(c.stdout, b)
	}
	stdout, stderr := c.stdout, c.stderr
	now, tty := time.Now(), isTerminal(stdout)
	switch {
	case len(runs) > 0:
		if err := writeRunsTable(stdout, runs, now, tty); err != nil {
			return err
		}
	case o.all:
		fmt.Fprintln(stderr, "flyctl: flyd has no runs")
	default:
		fmt.Fprintf(stderr, "flyctl: no runs in %s and none live (flyctl runs --all lists every workspace)\n", dir)
	}
	if len(apps) == 0 {
		return nil
	}
	if len(runs) > 0 {
		fmt.Fprintln(stdout)
	}
	return writeAppsTable(stdout, apps, now, tty)
}

// selected is what flyctl runs lists of l: everything with --all, else
// the runs and apps of the workspace containing dir and every live run,
// one-shot commands (devices, doctor, create: kind tool) left out.
func (o *runsOptions) selected(l *localclient.RunList, dir string) *localclient.RunList {
	sel := &localclient.RunList{}
	for i, r := range l.Runs {
		if o.all || (r.Kind != "tool" && (r.Live() || inWorkspace(r.Root, dir))) {
			sel.Runs, sel.RawRuns = append(sel.Runs, r), append(sel.RawRuns, l.RawRuns[i])
		}
	}
	for i, a := range l.Apps {
		if o.all || inWorkspace(a.Workspace, dir) {
			sel.Apps, sel.RawApps = append(sel.Apps, a), append(sel.RawApps, l.RawApps[i])
		}
	}
	return sel
}

// writeRunsTable writes runs as a table; tty chooses relative start
// times.
func writeRunsTable(w io.Writer, runs []runInfo, now time.Time, tty bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tKIND\tSTATE\tEXIT\tERRORS\tSTARTED\tBY\tROOT\tARGV\n")
	var claims []string
	for _, r := range runs {
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		row(tw, r.RunID, r.Kind, shownState(r.State, r.Crashed), exit, errorCount(r.Errors), startedAt(r.StartedAt, now, tty), startedBy(r), r.Root, shellJoin(r.Argv))
		if r.Claim != nil {
			claims = append(claims, fmt.Sprintf("%s is claimed by %q until %s%s", r.RunID, r.Claim.By.Client, r.Claim.Until.Local().Format("15:04:05"), quotedNote(r.Claim.Note)))
		}
		if a := r.LastAction; a != nil && r.Live() && a.What != "start" { // BY says who started it
			claims = append(claims, fmt.Sprintf("%s: last %s by %q %s: %s", r.RunID, a.What, a.By.Client, relative(now.Sub(a.At)), a.Outcome))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if note := errorsNote(runs); note != "" {
		claims = append([]string{note}, claims...)
	}
	for _, c := range claims {
		if _, err := fmt.Fprintln(w, safetext.Line(c)); err != nil {
			return err
		}
	}
	return nil
}

// errorCount is a run's errors for a table: the distinct ones since the
// last reload, and how many times the app reported any in all when that
// differs ("2 (17×)"); "-" for what keeps none.
func errorCount(e *wire.Errors) string {
	switch {
	case e == nil:
		return "-"
	case e.Total == e.Current:
		return strconv.Itoa(e.Current)
	}
	return fmt.Sprintf("%d (%d×)", e.Current, e.Total)
}

// errorsNote is the line under a table of runs that says what ERRORS
// holds, when a row counts errors in two ways; "" otherwise.
func errorsNote(runs []runInfo) string {
	for _, r := range runs {
		if e := r.Errors; e != nil && e.Total != e.Current {
			return "ERRORS: distinct errors since the last hot reload or restart (N×: reported N times in all); flyctl errors RUN lists them"
		}
	}
	return ""
}

// startedBy is who started a run, for a table: the client's name, flyd
// for an upstream server; "-" when the record does not say (a run older
// than the field).
func startedBy(r runInfo) string {
	switch {
	case r.StartedBy != nil && r.StartedBy.Client != "":
		return r.StartedBy.Client
	case r.StartedBy != nil:
		return "unnamed" // a client that gave no name
	case r.Kind == "upstream":
		return "flyd"
	}
	return "-"
}

func quotedNote(note string) string {
	if note == "" {
		return ""
	}
	return fmt.Sprintf(": %q", note)
}

// startedAt is t relative to now ("5m ago") on a terminal, else RFC 3339.
func startedAt(t, now time.Time, tty bool) string {
	if t.IsZero() {
		return "-"
	}
	if !tty {
		return t.Local().Format(time.RFC3339)
	}
	return relative(now.Sub(t))
}

// relative formats an age for people: "just now", "42s ago", "5m ago",
// "3h ago", "2d ago".
func relative(d time.Duration) string {
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

// shellJoin joins argv for display, quoting the words a shell would
// split or expand.
func shellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words[i] = a
	}
	return strings.Join(words, " ")
}

// newestRun picks the run --latest means: the newest run or build (not
// a one-shot tool) of the workspace that contains dir, else the newest
// of any workspace. runs is newest first, as flyd lists them.
func newestRun(runs []runInfo, dir string) (runInfo, bool) {
	candidates := slices.DeleteFunc(slices.Clone(runs), func(r runInfo) bool { return r.Kind == "tool" })
	for _, r := range candidates {
		if inWorkspace(r.Root, dir) {
			return r, true
		}
	}
	if len(candidates) > 0 {
		return candidates[0], true
	}
	return runInfo{}, false
}

// writeAppsTable writes the apps found outside fly as a table.
func writeAppsTable(w io.Writer, apps []wire.App, now time.Time, tty bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "EXTERNAL APP\tNAME\tIDE\tSINCE\tVM SERVICE\tWORKSPACE\n")
	for _, a := range apps {
		ide := a.IDE
		if ide == "" {
			ide = "-"
		}
		row(tw, a.ID, a.Name, ide, startedAt(a.Since, now, tty), a.VMServiceURI, a.Workspace)
	}
	return tw.Flush()
}
