package runs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/logring"
)

// TestRunFollowsVMServiceErrors: the framework errors a debug run posts
// on its VM service (never printed under --machine) reach the run's log
// as error entries and its error list, deduplicated and located in the
// project; a hot reload starts a new generation.
func TestRunFollowsVMServiceErrors(t *testing.T) {
	e := newEngine(t)
	r := startApp(t, e, fakeflutter.EnvErrorsAtStart, strings.Repeat("overflow,", 199)+"overflow", fakeflutter.EnvErrorsOnReload, "build")
	flytest.Eventually(t, "200 errors counted", func() bool { return r.Errors().Stats().Total == 200 })
	p := r.Errors().Read(0, false, 4<<10)
	if len(p.Entries) != 1 || p.Entries[0].Count != 200 || p.Entries[0].Location != "lib/main.dart:30:12" || p.Entries[0].Widget != "Row" {
		t.Fatalf("errors = %q, want one overflow counted 200 at lib/main.dart:30:12", p.Text)
	}
	n := 0
	for _, en := range r.Ring().Tail(r.Ring().Len()) {
		if en.Stream == logring.Error {
			n++
		}
	}
	if n != 200 {
		t.Errorf("%d error entries in the log, want 200", n)
	}
	if _, err := r.Restart(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	flytest.Eventually(t, "the error after the reload", func() bool { return r.Errors().Stats().Current == 1 && r.Errors().Stats().Generation == 1 })
	if p := r.Errors().Read(0, false, 4<<10); !strings.Contains(p.Text, "Exception: Oops — MyBrokenHomePage at lib/main.dart:11:13") {
		t.Errorf("after the reload: %q", p.Text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
