// Package wine tells whether this process runs under Wine, which fly's
// Windows tests use on Linux machines (.ci/wine). Wine runs Go's Windows
// binaries faithfully in most things, but some it does not judge as
// Windows does (it keeps no access lists on files, nor a named pipe's;
// it has no Task Scheduler): a test of those skips under Wine with
// SkipUnder, saying why, and runs on real Windows. Tests only.
package wine

import "testing"

// Detected reports whether this process runs under Wine.
func Detected() bool { return detected() }

// SkipUnder skips t under Wine, saying why Wine cannot judge it.
func SkipUnder(t testing.TB, why string) {
	t.Helper()
	if Detected() {
		t.Skipf("under Wine: %s (this runs on real Windows only)", why)
	}
}
