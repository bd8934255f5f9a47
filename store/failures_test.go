package store

import (
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFailureLogOnceThenSummaries: a disk that fails every commit (40 a
// second for 15 minutes) logs one error, a summary a minute, and one line
// when it works again, not one line per commit.
func TestFailureLogOnceThenSummaries(t *testing.T) {
	var logs logBuffer
	clock := time.Unix(1_700_000_000, 0)
	f := failureLog{log: slog.New(slog.NewTextHandler(&logs, nil)), what: "store commit", now: func() time.Time { return clock }}
	full := errors.New("write fly.db: " + syscall.ENOSPC.Error())
	for range 15 * 60 * 40 {
		f.observe(full, 10)
		clock = clock.Add(25 * time.Millisecond)
	}
	f.observe(nil, 0)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 15 || len(lines) > 17 {
		t.Fatalf("%d log lines for 36,000 failed commits over 15 minutes, want 1 + a summary a minute + 1:\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[0], "failed") || !strings.Contains(lines[0], "no space left") {
		t.Errorf("first line = %q, want the failure and its cause", lines[0])
	}
	if !strings.Contains(lines[1], "still failing") || !strings.Contains(lines[1], "entries_lost=") {
		t.Errorf("second line = %q, want a summary with what was lost", lines[1])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "works again") {
		t.Errorf("last line = %q, want the recovery", last)
	}
}
