package index

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNameRefusal(t *testing.T) {
	tests := []struct {
		name    string
		refused bool
	}{
		{"main.dart", false},
		{"pubspec.yaml", false},
		{".metadata", false},
		{"a..b.dart", false},
		{"my page.dart", false},
		{"q?.dart", false}, // Windows refuses it itself; it names nothing else
		{"lé.dart", false},
		{"console.dart", false}, // only the part before the first dot counts
		{"connect.dart", false},
		{"com10.dart", false},
		{"lpt.dart", false},
		{"auxiliary.dart", false},
		{"nullable.dart", false},
		{"main.dart~", false},
		{"x~.dart", false},
		{"a~1.dart", false},      // an extension of 4: not a short name
		{"longname~1.js", false}, // a base of 10
		{"~$doc.md", false},

		// Drives and alternate data streams.
		{"C:", true},
		{"C:foo", true},
		{"main.dart:hidden", true},
		{"main.dart::$DATA", true},
		{".env:x.dart", true},
		// Devices, in any case, with any extension and trailing spaces.
		{"CON", true},
		{"con", true},
		{"Con.dart", true},
		{"nul.g.dart", true},
		{"PRN.txt", true},
		{"aux", true},
		{"AUX .dart", true},
		{"COM1", true},
		{"com9.json", true},
		{"COM0", true},
		{"LPT1", true},
		{"lpt0.md", true},
		{"COM\u00b9", true},
		{"LPT\u00b3.txt", true},
		{"CONIN$", true},
		{"conout$.txt", true},
		// Trailing dots and spaces.
		{"key.properties.", true},
		{"main.dart ", true},
		{"lib.", true},
		{"...", true},
		{"CON.", true},
		// Short names.
		{"DOCKER~1", true},
		{"dart_t~1", true},
		{"PUB-CR~1.JSO", true},
		{"KEY~1.PRO", true},
		{"AB12~123.js", true},
		{"~1", true},
	}
	for _, tt := range tests {
		why := NameRefusal(tt.name)
		if (why != "") != tt.refused {
			t.Errorf("NameRefusal(%q) = %q, want refused %v", tt.name, why, tt.refused)
		}
	}
}

func TestFold(t *testing.T) {
	tests := []struct{ in, want string }{
		{"key.properties", "key.properties"},
		{"KEY.PROPERTIES", "key.properties"},
		{".Env", ".env"},
		{"key.propert\u0131es", "key.properties"}, // dotless ı: Windows upper-cases it to I
		{"KEY.PROPERT\u0130ES", "key.properties"}, // dotted İ
		{"key.propertie\u017f", "key.properties"}, // long ſ: macOS folds it to s
		{"\u212aey.properties", "key.properties"}, // the Kelvin sign: macOS folds it to k
		{".e\u200cnv", ".env"},                    // HFS+ ignores zero-width joiners
		{"\ufeff.env", ".env"},
		{"café.dart", "café.dart"},
		{"CAFÉ.dart", "cafÉ.dart"}, // letters that fold to no ASCII letter match no rule either way
	}
	for _, tt := range tests {
		if got := fold(tt.in); got != tt.want {
			t.Errorf("fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzNameRules: whatever the name, one that NameRefusal accepts is one
// that Windows reads as itself, and no other spelling of a name that a
// case-insensitive file system opens as the same file escapes the secret
// rules.
func FuzzNameRules(f *testing.F) {
	for _, s := range []string{"main.dart", "CON.txt", "key.properties", "KEY~1.PRO", "a:b", "x. ", ".ENV", "COM\u00b9", "\u212aey.pem"} {
		f.Add(s, "gh")
	}
	f.Fuzz(func(t *testing.T, name, parent string) {
		if why := NameRefusal(name); why == "" && name != "" {
			base := strings.TrimRight(strings.SplitN(name, ".", 2)[0], " ")
			switch {
			case strings.ContainsRune(name, ':'), strings.HasSuffix(name, "."), strings.HasSuffix(name, " "):
				t.Fatalf("NameRefusal(%q) accepted a name Windows reads as another", name)
			case len(base) >= 3 && strings.Contains("|CON|PRN|AUX|NUL|CONIN$|CONOUT$|", "|"+strings.ToUpper(base)+"|"):
				t.Fatalf("NameRefusal(%q) accepted a device", name)
			case len(base) == 4 && (strings.EqualFold(base[:3], "COM") || strings.EqualFold(base[:3], "LPT")) && '0' <= base[3] && base[3] <= '9':
				t.Fatalf("NameRefusal(%q) accepted a device", name)
			}
		}
		if !utf8.ValidString(name) {
			return
		}
		f := fold(name)
		if fold(f) != f {
			t.Fatalf("fold(%q) = %q, and fold of that = %q", name, f, fold(f))
		}
		secret := secretName(parent, name)
		for _, other := range []string{strings.ToUpper(name), strings.ToLower(name), f} {
			if secretName(parent, other) != secret || secretName(strings.ToUpper(parent), other) != secret {
				t.Fatalf("secretName(%q, %q) = %v, but %v for %q", parent, name, secret, !secret, other)
			}
		}
	})
}
