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
// CheckPeer reads carries it, its commit and date, and the protocol.
func TestVersionHeaderParses(t *testing.T) {
	v, p, ok := ParseVersionHeader(VersionHeader())
	if !ok || v != Version+buildMetadata(Version, Commit, Date) || p != Protocol {
		t.Errorf("ParseVersionHeader(%q) = %q, %d, %v, want %q, %d, true", VersionHeader(), v, p, ok, Version, Protocol)
	}
	if Version == "" {
		t.Error("Version is empty")
	}
}

func TestBuildMetadata(t *testing.T) {
	for _, c := range []struct{ version, commit, date, want string }{
		{"1.2.3", "0123456789abcdef0123", "2026-11-27T10:00:00+01:00", "+0123456789ab.20261127T090000Z"},
		{"1.2.3", "abc", "", "+abc"},
		{"1.2.3", "", "2026-11-27T10:00:00Z", "+20261127T100000Z"},
		{"1.2.3", "", "", ""},
		{"1.2.3+local", "abc", "2026-11-27T10:00:00Z", ""}, // the release's own metadata stays alone
		{"1.2.3", "ab c/../\x1b", "not a date", "+abc"},    // only what semver allows
	} {
		got := buildMetadata(c.version, c.commit, c.date)
		if got != c.want {
			t.Errorf("buildMetadata(%q, %q, %q) = %q, want %q", c.version, c.commit, c.date, got, c.want)
		}
		header := c.version + got + " protocol=1"
		if v, p, ok := ParseVersionHeader(header); !ok || v != c.version+got || p != 1 {
			t.Errorf("ParseVersionHeader(%q) = %q, %d, %v", header, v, p, ok)
		}
	}
}
