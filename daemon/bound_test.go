package daemon

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestBoundText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"claude-code", 128, "claude-code"},
		{"a\x1b[31mb\nc", 128, "a[31mbc"},
		{"naïve", 128, "naïve"},
		{"bad\xffutf8", 128, "badutf8"},
		{strings.Repeat("x", 20), 10, "xxxxxxx…"},
		{"ééééé", 8, "éé…"},
	} {
		if got := boundText(tc.in, tc.n); got != tc.want {
			t.Errorf("boundText(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzBoundText: whatever a client sends, what flyd keeps is valid UTF-8,
// holds no control character and fits the bound.
func FuzzBoundText(f *testing.F) {
	f.Add("claude-code\x00\x1b", 16)
	f.Add("ééé\xff", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = 4 + (n&0xff)%200
		got := boundText(s, n)
		if len(got) > n || !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("boundText(%q, %d) = %q", s, n, got)
		}
	})
}
