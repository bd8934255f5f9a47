package index

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NameRefusal says why a path element (a file's or a directory's name) is
// never served, or "" when it may be: Windows would read it as another
// file or as a device. It holds on every system, so that what flyd serves
// does not depend on where the workspace is (one may be shared with a
// Windows machine, or be a Windows drive mounted elsewhere), and none of
// these names belongs in a Flutter project:
//
//   - a ':' is a drive (C:foo) or a file's alternate data stream
//     (main.dart:hidden);
//   - CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$ and CONOUT$, in any case,
//     with any extension and trailing spaces, are devices;
//   - a trailing dot or space is dropped ("key.properties." opens
//     key.properties);
//   - a name shaped like an 8.3 short name (DOCKER~1, PUB-CR~1.JSO) can be
//     another name of a file or directory whose long name a rule refuses.
//
// Names that Windows merely refuses (with <, >, ", |, ? or *) are left to
// it: where they are valid, they name nothing else.
func NameRefusal(name string) string {
	if name == "" {
		return ""
	}
	switch name[len(name)-1] {
	case '.', ' ':
		return "the name " + strconv.Quote(name) + " ends in a dot or a space, which Windows drops, so that it names another file"
	}
	if strings.IndexByte(name, ':') >= 0 {
		return "the name " + strconv.Quote(name) + " has a ':', which Windows reads as a drive (C:) or an alternate data stream (file:stream)"
	}
	if isDeviceName(name) {
		return "the name " + strconv.Quote(name) + " is a device on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with any extension)"
	}
	if isShortName(name) {
		return "the name " + strconv.Quote(name) + " has the form of a Windows short name (like PROGRA~1), which can be another name of a file flyd does not serve"
	}
	return ""
}

// isDeviceName reports whether Windows opens a device for name: its part
// before the first dot, without trailing spaces, is a device's name.
func isDeviceName(name string) bool {
	switch name[0] | 0x20 {
	case 'c', 'p', 'a', 'n', 'l':
	default:
		return false
	}
	base := name
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	base = strings.TrimRight(base, " ")
	switch len(base) {
	case 3:
		for _, d := range []string{"CON", "PRN", "AUX", "NUL"} {
			if strings.EqualFold(base, d) {
				return true
			}
		}
	case 4, 5: // COM1, or COM¹ (¹ ² ³ count as digits)
		if !strings.EqualFold(base[:3], "COM") && !strings.EqualFold(base[:3], "LPT") {
			return false
		}
		switch d := base[3:]; d {
		case "\u00b9", "\u00b2", "\u00b3":
			return true
		default:
			return len(d) == 1 && '0' <= d[0] && d[0] <= '9'
		}
	case 6:
		return strings.EqualFold(base, "CONIN$")
	case 7:
		return strings.EqualFold(base, "CONOUT$")
	}
	return false
}

// isShortName reports whether name has the form of a generated 8.3 short
// name: a base of at most 8 characters ending in '~' and digits, and an
// extension of at most 3.
func isShortName(name string) bool {
	t := strings.LastIndexByte(name, '~')
	if t < 0 {
		return false
	}
	base, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > t {
		base, ext = name[:i], name[i+1:]
	}
	if len(base) > 8 || len(ext) > 3 || t == len(base)-1 {
		return false
	}
	for _, c := range []byte(base[t+1:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// fold returns a name as the rules compare it, so that a case-insensitive
// file system (Windows, macOS) opens no file under a spelling that a rule
// misses: ASCII letters in lower case; the few other letters whose case
// pairs with an ASCII one (ı, İ, ſ, the Kelvin sign) as that letter; and
// without the invisible code points HFS+ ignores in names. Any other
// letter can match no rule, which are ASCII.
func fold(s string) string {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldUnicode(s)
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	if !upper {
		return s
	}
	return strings.ToLower(s)
}

func foldUnicode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case hfsIgnored(r):
			continue
		case r < utf8.RuneSelf:
			r = unicode.ToLower(r)
		default:
			if l := unicode.ToLower(unicode.ToUpper(r)); l < utf8.RuneSelf {
				r = l
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hfsIgnored reports whether HFS+ ignores r in a name (as git does for
// .git: zero-width joiners and marks, directional controls, the BOM).
func hfsIgnored(r rune) bool {
	switch {
	case 0x200c <= r && r <= 0x200f, 0x202a <= r && r <= 0x202e, 0x206a <= r && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
