// Package safetext makes text that fly did not write safe to show: an
// app's output and errors, a Dart Tooling Daemon's file, an upstream
// server's answers, what an MCP client says of itself.
//
// Such text may carry what a reader does not see as itself: terminal
// escape sequences (ESC, CSI, OSC: clear the screen, set the window
// title, write the clipboard), other C0 and C1 controls, bidi overrides
// and isolates, zero-width and other format characters, line and
// paragraph separators, and newlines that make one entry read as
// several. Line, Lines and Field show each such rune as a visible escape
// in Go's syntax (\x1b, \n, \u202e), never as itself, and the bytes of
// invalid UTF-8 the same way (\xff). A backslash is left as it is: the
// escapes are for reading, not for decoding.
//
// flyd uses it for what agents read (tool results, resources), flyctl for
// what it prints on a terminal. It owns no policy on where text is shown
// or how long it may be beyond Cut, and imports only the standard
// library. Its functions are pure and safe for concurrent use; they
// return s itself when there is nothing to escape.
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a reader as itself: a C0 or C1
// control or DEL (tab and newline included), a format character
// (Unicode Cf: bidi embeddings, overrides, isolates and marks, zero-width
// spaces and joiners, the byte-order mark, tag characters), a line or
// paragraph separator, or a supplementary variation selector (invisible,
// and able to carry hidden bytes).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		r == '\u2028' || r == '\u2029' ||
		(r >= 0xe0100 && r <= 0xe01ef)
}

// Line returns s as one line: every Unsafe rune but tab, newlines
// included, is shown escaped.
func Line(s string) string { return escape(s, "\t") }

// Field returns s as Line does, with tab escaped too: a name, a cell of
// a table.
func Field(s string) string { return escape(s, "") }

// Lines returns s with its line breaks kept ("\r\n" becomes "\n") and
// each line as Line makes it.
func Lines(s string) string { return escape(s, "\t\n") }

// Cut returns s cut to at most n bytes on a rune boundary, ending in "…"
// when it was cut (when n leaves room for it).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	keep := n - len(ellipsis)
	if keep < 0 {
		keep, n = n, 0 // no room for the ellipsis
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	if n == 0 {
		return s[:keep]
	}
	return s[:keep] + ellipsis
}

// escape returns s with every Unsafe rune but those in keep (ASCII
// controls), and every byte of invalid UTF-8, escaped. When keep holds
// a newline, a carriage return before one is dropped.
func escape(s, keep string) string {
	i := firstUnsafe(s, keep)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case !Unsafe(r) || (r < utf8.RuneSelf && strings.IndexByte(keep, byte(r)) >= 0):
			b.WriteString(s[i : i+size])
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n") && strings.IndexByte(keep, '\n') >= 0:
			// a CRLF line break is a line break
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf:
			writeHex(&b, `\x`, uint32(r), 2)
		case r <= 0xffff:
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			writeHex(&b, `\U`, uint32(r), 8)
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first byte of s that escape changes,
// or -1.
func firstUnsafe(s, keep string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && strings.IndexByte(keep, c) < 0 {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[v>>uint(shift)&0xf])
	}
}
