package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
)

// TestErrorsCommand: flyctl errors prints a run's framework errors, one
// deduplicated line each (the run found from the current directory);
// --json is flyd's page; -f prints the errors a reload causes as they
// come, and ends with the run.
func TestErrorsCommand(t *testing.T) {
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t, fakeflutter.EnvTickMS+"=0", fakeflutter.EnvErrorsAtStart+"=overflow,overflow,overflow,nullcheck",
		fakeflutter.EnvErrorsOnReload+"=build")
	flytest.StartFlyd(t, e)
	root := flutterProject(t)
	cs, _ := mcpSession(t, e, root)
	id := startRun(t, cs)

	var pg wire.ErrorsPage
	flytest.Eventually(t, "the 4 errors thrown at start", func() bool {
		out, _, code := flyctl(t, e.Getenv, "errors", id, "--json")
		return code == 0 && json.Unmarshal([]byte(out), &pg) == nil && pg.Total == 4
	})
	if len(pg.Errors) != 2 || pg.RunID != id {
		t.Fatalf("errors --json = %+v", pg)
	}
	t.Chdir(root)
	out := mustFlyctl(t, e.Getenv, "errors")
	if want := "3× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12\n"; !strings.Contains(out, want) ||
		!strings.Contains(out, "Null check operator used on a null value") || strings.Count(out, "\n") != 2 {
		t.Errorf("flyctl errors =\n%s", out)
	}

	// -f: the reload's error arrives, then the run's end.
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var ferr error
	var stderr strings.Builder
	wg.Go(func() {
		ferr = run(ctx, []string{"errors", id, "-f"}, e.Getenv, strings.NewReader(""), pw, &stderr)
		pw.Close()
	})
	defer wg.Wait()
	lines := make(chan string, 100)
	go func() { // owned by the pipe: ends when flyctl closes it
		defer close(lines)
		b := make([]byte, 64<<10)
		var buf string
		for {
			n, err := pr.Read(b)
			buf += string(b[:n])
			for {
				i := strings.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				lines <- buf[:i]
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("flyctl errors -f ended waiting for %s: %v\n%s", what, ferr, stderr.String())
			}
			return l
		case <-time.After(time.Minute):
			t.Fatalf("flyctl errors -f printed no %s", what)
		}
		return ""
	}
	for range 2 { // the errors so far
		next("the current errors")
	}
	callTool(t, cs, "flutter_hot_reload", map[string]any{"run_id": id}, nil)
	if l := next("the reload's line"); l != "-- reload 1 --" {
		t.Errorf("after the reload -f printed %q, want the reload's line", l)
	}
	if l := next("the reload's error"); l != "1× Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13 (thrown at lib/main.dart:26:5)" {
		t.Errorf("after the reload -f printed %q", l)
	}
	out = mustFlyctl(t, e.Getenv, "errors", id, "--all")
	for _, want := range []string{"[reload 1] 1× Exception: Oops", "[start] 3× A RenderFlex overflowed", "[start] 1× Null check"} {
		if !strings.Contains(out, want) {
			t.Errorf("flyctl errors --all after a reload =\n%s\nwant a line with %q", out, want)
		}
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": id}, nil)
	for range lines {
	}
	wg.Wait()
	if ferr != nil || !strings.Contains(stderr.String(), "ended (stopped)") {
		t.Errorf("flyctl errors -f ended with %v, stderr %q", ferr, stderr.String())
	}
}

// clockWriter writes each line after the time of a simulated clock, so
// that a golden shows when each line would be printed.
type clockWriter struct {
	b   strings.Builder
	now *time.Duration
}

func (w *clockWriter) Write(p []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if l != "" {
			fmt.Fprintf(&w.b, "%5.1fs  %s", w.now.Seconds(), l)
		}
	}
	return len(p), nil
}

// overflowScript is what flyd sends a follow of a run whose app repeats
// one overflow 60 times a second: the errors so far, a page of changes
// every 100 ms for 4 s (8× … 251×), a hot reload after which it throws a
// build error and overflows again, and the run's end.
func overflowScript() []struct {
	at time.Duration
	pg wire.ErrorsPage
} {
	overflow := func(id uint64, gen, n int) wire.AppError {
		return wire.AppError{ID: id, Count: n, Generation: gen,
			Line: fmt.Sprintf("%d× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12", n)}
	}
	var script []struct {
		at time.Duration
		pg wire.ErrorsPage
	}
	add := func(at time.Duration, gen int, errs ...wire.AppError) {
		script = append(script, struct {
			at time.Duration
			pg wire.ErrorsPage
		}{at, wire.ErrorsPage{Type: "errors", RunID: "01run", Generation: gen, Errors: errs}})
	}
	add(0, 0, overflow(1, 0, 8), wire.AppError{ID: 2, Count: 1, Line: "1× Null check operator used on a null value (thrown at lib/main.dart:31:28)"})
	for i := 1; i <= 40; i++ {
		add(time.Duration(i)*100*time.Millisecond, 0, overflow(1, 0, 8+i*243/40))
	}
	add(4500*time.Millisecond, 1, wire.AppError{ID: 3, Count: 1, Generation: 1,
		Line: "1× Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13 (thrown at lib/main.dart:26:5)"})
	for i := 1; i <= 15; i++ {
		add(4500*time.Millisecond+time.Duration(i)*100*time.Millisecond, 1, overflow(4, 1, i*4))
	}
	script = append(script, struct {
		at time.Duration
		pg wire.ErrorsPage
	}{6200 * time.Millisecond, wire.ErrorsPage{Type: wire.LogLineEnd, State: "stopped"}})
	return script
}

// TestErrorsFollowGolden: flyctl errors -f prints a new error at once and
// a repeating one's count at most every 5 s, its last count when the run
// ends; a reload is a line, or with --all a label on each error. The
// golden shows when each line is printed, on a simulated clock that
// fires the printer's timer as followErrors does.
func TestErrorsFollowGolden(t *testing.T) {
	for _, all := range []bool{false, true} {
		var now time.Duration
		out := &clockWriter{now: &now}
		var stderr strings.Builder
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		p := &errorsPrinter{w: out, stderr: &stderr, all: all, follow: true, every: errorsRepeatEvery}
		for _, step := range overflowScript() {
			for { // the timer fires before the next page
				at, ok := p.due()
				if !ok || at.Sub(base) > step.at {
					break
				}
				now = at.Sub(base)
				if err := p.flush(at, false); err != nil {
					t.Fatal(err)
				}
			}
			now = step.at
			var err error
			if step.pg.Type == wire.LogLineEnd {
				err = p.flush(base.Add(now), true)
			} else {
				err = p.page(step.pg, base.Add(now))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		name := "cli/errors_follow.golden"
		if all {
			name = "cli/errors_follow_all.golden"
		}
		checkGolden(t, name, out.b.String())
		if lines := strings.Count(out.b.String(), "\n"); lines > 9 {
			t.Errorf("errors -f (all=%v) printed %d lines for 3 errors over 6 s, want at most 9", all, lines)
		}
		if stderr.Len() > 0 {
			t.Errorf("errors -f (all=%v) wrote %q to stderr", all, stderr.String())
		}
	}
}

// TestErrorsAllGolden: flyctl errors --all labels each error with the
// reload generation it was seen in; without --all no label.
func TestErrorsAllGolden(t *testing.T) {
	pg := wire.ErrorsPage{Type: "errors", RunID: "01run", Generation: 2, Total: 260, Errors: []wire.AppError{
		{ID: 5, Count: 45, Generation: 2, Line: "45× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12"},
		{ID: 4, Count: 1, Generation: 1, Line: "1× Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13 (thrown at lib/main.dart:26:5)"},
		{ID: 1, Count: 204, Generation: 0, Line: "204× A RenderFlex overflowed by 42 pixels on the right. — Row at lib/main.dart:30:12"},
		{ID: 2, Count: 1, Generation: 0, Line: "1× Null check operator used on a null value (thrown at lib/main.dart:31:28)"},
	}}
	var stdout, stderr strings.Builder
	if err := printErrors(&stdout, &stderr, pg, true); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "cli/errors_all.golden", stdout.String())
	stdout.Reset()
	pg.Errors = pg.Errors[:1]
	if err := printErrors(&stdout, &stderr, pg, false); err != nil || stdout.String() != pg.Errors[0].Line+"\n" || stderr.Len() > 0 {
		t.Errorf("errors without --all = %q, %q, %v; want the line alone", stdout.String(), stderr.String(), err)
	}
}

// TestFollowErrorsTimer: a count held back is printed when its turn
// comes, with no further page from flyd; the held counts are printed
// when the run ends.
func TestFollowErrorsTimer(t *testing.T) {
	pages := make(chan wire.ErrorsPage)
	closed := make(chan struct{})
	next := func() (wire.ErrorsPage, error) {
		select {
		case pg := <-pages:
			return pg, nil
		case <-closed:
			return wire.ErrorsPage{}, io.EOF
		}
	}
	var closeOnce sync.Once
	closeStream := func() error { closeOnce.Do(func() { close(closed) }); return nil }
	var stdout, stderr flytest.Buffer
	p := &errorsPrinter{w: &stdout, stderr: &stderr, follow: true, every: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- followErrors(context.Background(), next, closeStream, p, "01run") }() // ends with the end page below
	e := func(n int) wire.ErrorsPage {
		return wire.ErrorsPage{Type: "errors", RunID: "01run", Errors: []wire.AppError{{ID: 1, Count: n, Line: fmt.Sprintf("%d× overflow", n)}}}
	}
	pages <- e(1)
	pages <- e(2) // held: 1× was just printed
	pages <- e(3)
	flytest.Eventually(t, "the held 3× printed by the timer", func() bool { return stdout.String() == "1× overflow\n3× overflow\n" })
	pages <- e(4) // held again
	pages <- wire.ErrorsPage{Type: wire.LogLineEnd, State: "stopped"}
	if err := <-done; err != nil {
		t.Fatalf("followErrors = %v", err)
	}
	if got, want := stdout.String(), "1× overflow\n3× overflow\n4× overflow\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if !strings.Contains(stderr.String(), "run 01run ended (stopped)") {
		t.Errorf("stderr = %q, want the run's end", stderr.String())
	}
}
