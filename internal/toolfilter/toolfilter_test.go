package toolfilter

import (
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	tags := map[string][]string{
		"flutter_run": {"run", "app", "all"},
		"files_grep":  {"files", "all"},
		"dart_pub":    {"upstream", "dart", "all"},
		"dart_format": {"upstream", "dart", "all"},
	}
	for _, tc := range []struct {
		tools, disable []string
		allowed        string
	}{
		{nil, nil, "dart_format dart_pub files_grep flutter_run"},
		{[]string{"app"}, nil, "flutter_run"},
		{[]string{"app,files"}, nil, "files_grep flutter_run"},
		{[]string{"app", "dart"}, []string{"dart_pub*"}, "dart_format flutter_run"},
		{nil, []string{"upstream"}, "files_grep flutter_run"},
		{[]string{"*_run", "files_grep"}, nil, "files_grep flutter_run"},
		{[]string{"all"}, []string{"files"}, "dart_format dart_pub flutter_run"},
	} {
		f, err := Parse(tc.tools, tc.disable)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range []string{"dart_format", "dart_pub", "files_grep", "flutter_run"} {
			if ok, why := f.Allows(n, tags[n]); ok {
				got = append(got, n)
			} else if why == "" {
				t.Errorf("%s refused without a reason", n)
			}
		}
		if s := strings.Join(got, " "); s != tc.allowed {
			t.Errorf("tools=%v disable=%v allows %q, want %q", tc.tools, tc.disable, s, tc.allowed)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{"a/b", "x y\n", "[", "é", strings.Repeat("a", MaxTermLen+1), "a=b"} {
		if _, err := Parse([]string{bad}, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Parse([]string{strings.Repeat("a,", MaxTerms+1)}, nil); err == nil {
		t.Error("too many terms accepted")
	}
	f, err := Parse(nil, []string{"sdk"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := f.Allows("flutter_build", []string{"sdk"}); ok || !strings.Contains(why, `"sdk"`) || !strings.Contains(why, "disable=sdk") {
		t.Errorf("disable=sdk: %v %q", ok, why)
	}
}

// FuzzParse: any input is parsed or refused, never a panic, and what is
// parsed stays within the bounds.
func FuzzParse(f *testing.F) {
	f.Add("app,files", "dart_pub*")
	f.Add("[a-", "")
	f.Add("*,?,[]", "a\\b")
	f.Fuzz(func(t *testing.T, tools, disable string) {
		fl, err := Parse([]string{tools}, []string{disable})
		if err != nil {
			return
		}
		if n := len(fl.Terms()); n > 2*MaxTerms {
			t.Fatalf("%d terms", n)
		}
		for _, term := range fl.Terms() {
			if len(term) > MaxTermLen || strings.ContainsAny(term, ", /") {
				t.Fatalf("term %q", term)
			}
		}
		fl.Allows("flutter_run", []string{"run", "app"})
		_ = fl.String()
	})
}
