package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// versionLine is what flyd version prints: "flyd 1.2.3 (commit abc1234,
// 2026-11-27; protocol 1)", leaving out the commit and date where the
// build does not know them (flyctl version prints the same for flyctl).
func versionLine() string {
	var about []string
	if c := wire.Commit; c != "" {
		about = append(about, "commit "+c[:min(len(c), 7)])
	}
	if d := wire.Date; d != "" {
		if t, err := time.Parse(time.RFC3339, d); err == nil {
			d = t.UTC().Format(time.DateOnly)
		}
		about = append(about, d)
	}
	build := ""
	if len(about) > 0 {
		build = strings.Join(about, ", ") + "; "
	}
	return fmt.Sprintf("flyd %s (%sprotocol %d)", wire.Version, build, wire.Protocol)
}
