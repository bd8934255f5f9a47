package wire

import (
	"runtime/debug"
	"testing"
)

// TestResolveBuild: link-time values win; a go install or go build
// without them reports the module's version and the checkout's commit.
func TestResolveBuild(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-27T10:00:00Z"},
	}
	info := func(version string, settings []debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/fly-dev/fly", Version: version}, Settings: settings}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		read                  func() (*debug.BuildInfo, bool)
		want                  buildValues
	}{
		{"release build", "1.2.3", "abc", "2026-01-02T03:04:05Z", info("v9.9.9", vcs),
			buildValues{"1.2.3", "abc", "2026-01-02T03:04:05Z"}},
		{"leading v dropped", "v1.2.3", "abc", "2026-01-02T03:04:05Z", none,
			buildValues{"1.2.3", "abc", "2026-01-02T03:04:05Z"}},
		{"go install module@version", "", "", "", info("v1.2.3", nil),
			buildValues{"1.2.3", "", ""}},
		{"go build in a checkout", "", "", "", info("v0.0.0-20261127100000-0123456789ab+dirty", vcs),
			buildValues{"0.0.0-20261127100000-0123456789ab+dirty", "0123456789abcdef0123456789abcdef01234567", "2026-11-27T10:00:00Z"}},
		{"go build -buildvcs=false", "", "", "", info("(devel)", nil),
			buildValues{DevVersion, "", ""}},
		{"no build info", "", "", "", none,
			buildValues{DevVersion, "", ""}},
		{"version only at link time", "1.2.3", "", "", info("(devel)", vcs),
			buildValues{"1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-11-27T10:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveBuild(tc.version, tc.commit, tc.date, tc.read)
			if got != tc.want {
				t.Errorf("resolveBuild(%q, %q, %q) = %+v, want %+v", tc.version, tc.commit, tc.date, got, tc.want)
			}
		})
	}
}

// TestVersionHeaderParses: whatever the build's version, the header
// CheckPeer reads carries it and the protocol.
func TestVersionHeaderParses(t *testing.T) {
	v, p, ok := ParseVersionHeader(VersionHeader())
	if !ok || v != Version || p != Protocol {
		t.Errorf("ParseVersionHeader(%q) = %q, %d, %v, want %q, %d, true", VersionHeader(), v, p, ok, Version, Protocol)
	}
	if Version == "" {
		t.Error("Version is empty")
	}
}
