package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
)

// TestVersion: flyd version and flyd --version print the release and the
// protocol on stdout, in the form flyctl version has.
func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^flyd [^ ]+ \((commit [0-9a-f]+, )?([0-9-]+; )?protocol [0-9]+\)\n$`)
	for _, arg := range []string{"version", "--version"} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{arg}, func(string) string { return "" }, &stdout, &stderr)
		if err != nil || !want.MatchString(stdout.String()) || stderr.Len() > 0 {
			t.Errorf("flyd %s = %v, stdout %q, stderr %q; want nil and a line matching %s", arg, err, &stdout, &stderr, want)
		}
	}
}
