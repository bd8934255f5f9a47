package main

import (
	"context"
	"encoding/json"
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
	if l := next("the reload's error"); l != "1× Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13 (thrown at lib/main.dart:26:5)" {
		t.Errorf("after the reload -f printed %q", l)
	}
	callTool(t, cs, "flutter_stop", map[string]any{"run_id": id}, nil)
	for range lines {
	}
	wg.Wait()
	if ferr != nil || !strings.Contains(stderr.String(), "ended (stopped)") {
		t.Errorf("flyctl errors -f ended with %v, stderr %q", ferr, stderr.String())
	}
}
