package store

import (
	"log/slog"
	"time"
)

// failureSummaryEvery is how often a persistent failure is summarised.
const failureSummaryEvery = time.Minute

// failureLog reports a failure that persists (a full disk fails every
// commit) once when it starts, then as a summary at most once per
// failureSummaryEvery, and once more when it clears, instead of one line
// per attempt. Its owner calls observe after each attempt; it is not safe
// for concurrent use: the writer of the queue owns it.
type failureLog struct {
	log  *slog.Logger
	what string

	failing    bool
	since      time.Time // when the current failure began
	lastReport time.Time
	attempts   int // failed attempts since the last report
	lost       int // entries lost since the last report
	total      int // failed attempts since the failure began

	now func() time.Time // nil: time.Now; tests set it
}

// observe records the outcome of one attempt that, if err is not nil,
// lost lost entries.
func (f *failureLog) observe(err error, lost int) {
	now := time.Now()
	if f.now != nil {
		now = f.now()
	}
	if err == nil {
		if f.failing {
			f.log.Info(f.what+" works again", "failed_attempts", f.total, "failing_for", now.Sub(f.since).Round(time.Millisecond).String())
			*f = failureLog{log: f.log, what: f.what, now: f.now}
		}
		return
	}
	f.total++
	if !f.failing {
		f.failing, f.since, f.lastReport = true, now, now
		f.log.Error(f.what+" failed: log entries are being lost; while this lasts, a summary is logged every minute",
			logErr, err, "entries_lost", lost)
		return
	}
	f.attempts++
	f.lost += lost
	if now.Sub(f.lastReport) >= failureSummaryEvery {
		f.log.Error(f.what+" still failing", logErr, err, "failed_attempts", f.attempts, "entries_lost", f.lost,
			"failing_for", now.Sub(f.since).Round(time.Second).String())
		f.attempts, f.lost, f.lastReport = 0, 0, now
	}
}
