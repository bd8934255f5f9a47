package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/wire"
)

// TestVersion: flyctl version prints the release, commit, date and
// protocol on one line; --json says "product": "fly", which is how the
// install scripts tell this flyctl from fly.io's.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"version"}, helpEnv, strings.NewReader(""), &stdout, &stderr)
	want := regexp.MustCompile(`^flyctl [^ ]+ \((commit [0-9a-f]+, )?([0-9-]+; )?protocol [0-9]+\)\n$`)
	if err != nil || !want.MatchString(stdout.String()) {
		t.Errorf("flyctl version = %v, stdout %q; want nil and a line matching %s", err, &stdout, want)
	}

	stdout.Reset()
	err = run(context.Background(), []string{"version", "--json"}, helpEnv, strings.NewReader(""), &stdout, &stderr)
	var got versionInfo
	if err != nil {
		t.Fatalf("flyctl version --json = %v, want nil", err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("flyctl version --json printed %q: %v", &stdout, err)
	}
	if got.Product != "fly" || got.Program != "flyctl" || got.Version != wire.Version || got.Protocol != wire.Protocol {
		t.Errorf("flyctl version --json = %+v, want product fly, program flyctl, version %q, protocol %d", got, wire.Version, wire.Protocol)
	}
	// install.sh looks for this exact text, without parsing JSON.
	if !strings.Contains(stdout.String(), `"product": "fly"`) {
		t.Errorf("flyctl version --json = %q, want it to hold %q", &stdout, `"product": "fly"`)
	}
}

// TestVersionLine: the commit is abbreviated, the date is its day, and
// what the build does not know is left out.
func TestVersionLine(t *testing.T) {
	defer func(v, c, d string) { wire.Version, wire.Commit, wire.Date = v, c, d }(wire.Version, wire.Commit, wire.Date)
	for _, tc := range []struct{ version, commit, date, want string }{
		{"1.2.3", "abc1234def5678", "2026-11-27T10:00:00Z", "flyctl 1.2.3 (commit abc1234, 2026-11-27; protocol 1)"},
		{"1.2.3", "", "", "flyctl 1.2.3 (protocol 1)"},
		{"1.2.3", "abc", "", "flyctl 1.2.3 (commit abc; protocol 1)"},
	} {
		wire.Version, wire.Commit, wire.Date = tc.version, tc.commit, tc.date
		if got := versionLine("flyctl"); got != strings.Replace(tc.want, "protocol 1", "protocol "+strconv.Itoa(wire.Protocol), 1) {
			t.Errorf("versionLine(%q, %q, %q) = %q, want %q", tc.version, tc.commit, tc.date, got, tc.want)
		}
	}
}
