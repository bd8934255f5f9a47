package flytest

import (
	"bytes"
	"net/http"
	"os/exec"
	"testing"
	"time"
)

// GrepCase is a search the benchmarks run with flyd and with rg alike.
type GrepCase struct {
	Name, Pattern string
	Literal       bool
	RgArgs        []string
}

// GrepCases are the searches of the 100k-file tree: a literal and a
// selective regexp, each matching the two lines of one widget.
var GrepCases = []GrepCase{
	{"literal", "W012345", true, []string{"-F", "W012345"}},
	{"regexp", `W0123\d\d\b`, false, []string{`W0123\d\d\b`}},
}

// Ripgrep returns the path of rg, skipping the benchmark without it.
func Ripgrep(b *testing.B) string {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not installed (apt-get install ripgrep): no baseline")
	}
	return rg
}

// RunRipgrep runs a cold rg process for c over root and returns how long
// it took and the matching lines it printed.
func RunRipgrep(b *testing.B, rg, root string, c GrepCase) (time.Duration, int) {
	b.Helper()
	start := time.Now()
	out, err := exec.Command(rg, append([]string{"--no-heading", "-n"}, append(c.RgArgs, root)...)...).Output()
	if err != nil {
		b.Fatalf("rg: %v", err)
	}
	return time.Since(start), bytes.Count(out, []byte("\n"))
}

// Bearer is an http.RoundTripper that adds flyd's token to every request.
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Base.RoundTrip(r)
}
