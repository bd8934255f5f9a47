package runs

import (
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// LogURI names the log of a run as flyd serves it: logs://run/{id},
// logs://upstream/{id}, or logs://build/{id} for builds and one-shot
// commands. Tools, resources and the HTTP API all give this name.
func LogURI(kind store.Kind, id string) string {
	switch kind {
	case store.KindRun:
		return "logs://run/" + id
	case store.KindUpstream:
		return "logs://upstream/" + id
	}
	return "logs://build/" + id
}

// Info is a run's record as tools and the HTTP API report it.
func Info(rec store.Record) wire.Run {
	return wire.Run{
		RunID: rec.ID, Kind: string(rec.Kind), State: string(rec.State), Argv: rec.Argv, Root: rec.Root, PID: rec.PID,
		ExitCode: rec.ExitCode, StartedAt: rec.StartedAt, EndedAt: rec.EndedAt, AppID: rec.AppID,
		VMServiceURI: rec.VMServiceURI, DTDURI: rec.DTDURI, Error: rec.Error, LogURI: LogURI(rec.Kind, rec.ID),
	}
}
