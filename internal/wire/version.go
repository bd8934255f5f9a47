package wire

import (
	"runtime/debug"
	"strings"
)

// DevVersion is Version in a build that says nothing of its release: a
// go build with neither link-time values nor a module version.
const DevVersion = "0.1.0-dev"

// The build's release, commit and commit date as set at link time. A
// release build (packaging/release, through goreleaser) sets all three:
//
//	-ldflags "-X github.com/fly-dev/fly/internal/wire.version=1.2.3
//	          -X github.com/fly-dev/fly/internal/wire.commit=<full hash>
//	          -X github.com/fly-dev/fly/internal/wire.date=2026-11-27T10:00:00Z"
//
// They are unexported so that what the rest of the code reads, Version,
// Commit and Date, can fall back to what the Go toolchain recorded: -X
// only sets a variable whose initializer is a constant.
var (
	version string
	commit  string
	date    string
)

// Version, Commit and Date describe this build: its release ("1.2.3",
// without a leading v), the full hash of the commit it was built from and
// that commit's time (RFC 3339), "" where unknown. They are the link-time
// values if set, else what debug.ReadBuildInfo says: the main module's
// version (a "go install github.com/fly-dev/fly/cmd/flyctl@v1.2.3" build
// has v1.2.3), and vcs.revision and vcs.time when built in a checkout.
// Version is DevVersion when neither says anything. Only Version goes
// into HeaderVersion.
var (
	build   = resolveBuild(version, commit, date, debug.ReadBuildInfo)
	Version = build.version
	Commit  = build.commit
	Date    = build.date
)

type buildValues struct{ version, commit, date string }

// resolveBuild is what Version, Commit and Date are, given the link-time
// values and the build info.
func resolveBuild(version, commit, date string, read func() (*debug.BuildInfo, bool)) buildValues {
	b := buildValues{version: strings.TrimPrefix(version, "v"), commit: commit, date: date}
	if b.version != "" && b.commit != "" && b.date != "" {
		return b
	}
	info, ok := read()
	if !ok || info == nil {
		info = &debug.BuildInfo{}
	}
	if b.version == "" {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.version = strings.TrimPrefix(v, "v")
		} else {
			b.version = DevVersion
		}
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && b.commit == "":
			b.commit = s.Value
		case s.Key == "vcs.time" && b.date == "":
			b.date = s.Value
		}
	}
	return b
}
