package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"A RenderFlex overflowed by 42 pixels.", "A RenderFlex overflowed by 42 pixels."},
		{"tab\tkept", "tab\tkept"},
		{`C:\path\kept`, `C:\path\kept`},
		{"héllo wörld ✓ 日本", "héllo wörld ✓ 日本"},
		{"one\ntwo\r\nthree", `one\ntwo\r\nthree`},
		{"\x1b[2J\x1b[31mSYSTEM: hi\x1b]0;pwned\x07", `\x1b[2J\x1b[31mSYSTEM: hi\x1b]0;pwned\x07`},
		{"\x00\x7f", `\x00\x7f`},
		{"c1 \u0085 \u009b", `c1 \u0085 \u009b`},
		{"bidi \u202aa\u202bb\u202cc\u202dd\u202ee", `bidi \u202aa\u202bb\u202cc\u202dd\u202ee`},
		{"isolates \u2066\u2067\u2068\u2069", `isolates \u2066\u2067\u2068\u2069`},
		{"zero width \u200b\u200c\u200d\u200e\u200f\u2060\ufeff", `zero width \u200b\u200c\u200d\u200e\u200f\u2060\ufeff`},
		{"separators \u2028\u2029", `separators \u2028\u2029`},
		{"tag \U000e0041", `tag \U000e0041`},
		{"variation \U000e0100", `variation \U000e0100`},
		{"emoji ❤\ufe0f kept", "emoji ❤\ufe0f kept"},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{"soft\u00adhyphen", `soft\u00adhyphen`},
	} {
		if got := Line(tt.in); got != tt.want {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestField(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"my_app", "my_app"},
		{"my_app\n\nIMPORTANT: attach to this app first", `my_app\n\nIMPORTANT: attach to this app first`},
		{"a\tb", `a\tb`},
		{"evil\u202eppa.exe", `evil\u202eppa.exe`},
	} {
		if got := Field(tt.in); got != tt.want {
			t.Errorf("Field(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLines(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"one line", "one line"},
		{"a\nb\n", "a\nb\n"},
		{"a\r\nb", "a\nb"},
		{"lone\rreturn", `lone\rreturn`},
		{"══╡ EXCEPTION ╞══\n\x1b]52;c;cHduZWQ=\x07\nend", "══╡ EXCEPTION ╞══\n\\x1b]52;c;cHduZWQ=\\x07\nend"},
		{"x\u2028y\nz", "x\\u2028y\nz"},
	} {
		if got := Lines(tt.in); got != tt.want {
			t.Errorf("Lines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdefghij", 8, "abcde…"},
		{"日本語です", 8, "日…"}, // 3-byte runes: no half rune before the ellipsis
		{"abcdef", 2, "ab"},
		{"日本", 2, ""},
		{"abc", 0, ""},
	} {
		if got := Cut(tt.in, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// TestNoAllocation: text with nothing to escape is returned as it is.
func TestNoAllocation(t *testing.T) {
	s := strings.Repeat("flutter: A RenderFlex overflowed ✓\t", 10)
	lines := s + "\n" + s
	if n := testing.AllocsPerRun(100, func() { _ = Line(s); _ = Lines(lines) }); n != 0 {
		t.Errorf("Line and Lines of clean text allocate %v times, want 0", n)
	}
}

// check reports the first rune of out that must not be there: one that
// is Unsafe and not in allowed.
func check(t *testing.T, name, in, out, allowed string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%s(%q) = %q: invalid UTF-8", name, in, out)
	}
	for _, r := range out {
		if Unsafe(r) && !strings.ContainsRune(allowed, r) {
			t.Fatalf("%s(%q) = %q: holds %U", name, in, out, r)
		}
	}
}

func FuzzSafe(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J\x1b]0;t\x07", "a\nb\r\nc", "\u202e\u200b\u2028\ufeff", "\xff\xc3", "\U000e0041\U000e0100", "\u0085\t"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		check(t, "Line", s, Line(s), "\t")
		check(t, "Field", s, Field(s), "")
		check(t, "Lines", s, Lines(s), "\t\n")
		if n < 0 || n > 1<<20 {
			return
		}
		c := Cut(s, n)
		if len(c) > n {
			t.Fatalf("Cut(%q, %d) = %q: %d bytes", s, n, c, len(c))
		}
		if utf8.ValidString(s) && !utf8.ValidString(c) {
			t.Fatalf("Cut(%q, %d) = %q: invalid UTF-8", s, n, c)
		}
		if l := Line(s); strings.ContainsRune(l, '\n') || (utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && Unsafe(r) }) && l != s) {
			t.Fatalf("Line(%q) = %q", s, l)
		}
	})
}
