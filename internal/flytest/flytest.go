// Package flytest builds and runs fly's real binaries for end-to-end
// tests: it builds cmd/flyd and cmd/flyctl once per test binary, makes
// isolated installations (socket, state dir, environment) in short temp
// dirs, puts the fake flutter on their PATH, and starts and stops flyd.
//
// Only _test.go files import it. It does not import package daemon, so
// daemon's own tests can use it; what a test needs to know about
// daemon's types stays in that test's package.
package flytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// bins are the real flyd and flyctl, built once per test binary.
var bins struct {
	once         sync.Once
	dir          string
	flyd, flyctl string
	err          error
	out          []byte
}

// EnvBinaries names a directory of prebuilt flyd and flyctl binaries for
// Binaries to use instead of building them: a test binary run where no
// Go toolchain is (a Windows test binary under Wine, see .ci/wine).
const EnvBinaries = "FLY_TEST_BINARIES"

// Binaries builds cmd/flyd and cmd/flyctl, race-checked when the test
// binary is (else as the release does), and returns their paths (or those in $FLY_TEST_BINARIES).
// The first call builds; later calls, from any goroutine, wait for it
// and share the result. Call Cleanup from TestMain to remove them.
func Binaries(t testing.TB) (flyd, flyctl string) {
	t.Helper()
	bins.once.Do(func() {
		if dir := os.Getenv(EnvBinaries); dir != "" {
			bins.flyd, bins.flyctl = filepath.Join(dir, "flyd"+exeSuffix), filepath.Join(dir, "flyctl"+exeSuffix)
			for _, p := range []string{bins.flyd, bins.flyctl} {
				if _, err := os.Stat(p); err != nil {
					bins.err = fmt.Errorf("%s: %w", EnvBinaries, err)
				}
			}
			return
		}
		bins.dir, bins.err = os.MkdirTemp("", "flybin")
		if bins.err != nil {
			return
		}
		args := []string{"build", "-o", bins.dir + string(filepath.Separator)}
		env := os.Environ()
		if Race {
			args = append(args, "-race")
		} else {
			// As the release builds them (packaging/goreleaser.yaml):
			// static, so that what the tests and benchmarks start is what
			// users run (a cgo build links libc dynamically: its shim
			// starts 2–4 ms later and takes more memory).
			args = append(args, "-trimpath", "-ldflags=-s -w")
			env = append(env, "CGO_ENABLED=0")
		}
		args = append(args, "github.com/fly-dev/fly/cmd/flyd", "github.com/fly-dev/fly/cmd/flyctl")
		cmd := exec.Command("go", args...)
		cmd.Env = env
		bins.out, bins.err = cmd.CombinedOutput()
		bins.flyd = filepath.Join(bins.dir, "flyd"+exeSuffix)
		bins.flyctl = filepath.Join(bins.dir, "flyctl"+exeSuffix)
	})
	if bins.err != nil {
		t.Fatalf("build flyd and flyctl: %v\n%s", bins.err, bins.out)
	}
	return bins.flyd, bins.flyctl
}

// exeSuffix ends the name of a program on this OS: ".exe" on Windows.
var exeSuffix = map[bool]string{true: ".exe"}[runtime.GOOS == "windows"]

// Cleanup removes the binaries Binaries built, if any. Call it from
// TestMain after m.Run.
func Cleanup() {
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
}

// Buffer is a bytes.Buffer that a process or goroutine may write while
// the test reads it. Its methods are safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BuildFlyd builds another flyd, with the link-time values ldflags sets
// (a newer release, a newer holder protocol), race-checked when the test
// binary is, into a directory of the test's, and returns its path.
func BuildFlyd(t testing.TB, ldflags string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", filepath.Join(dir, "flyd"+exeSuffix), "-ldflags", ldflags}
	if Race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/fly-dev/fly/cmd/flyd")...).CombinedOutput()
	if err != nil {
		t.Fatalf("build flyd with %s: %v\n%s", ldflags, err, out)
	}
	return filepath.Join(dir, "flyd"+exeSuffix)
}
