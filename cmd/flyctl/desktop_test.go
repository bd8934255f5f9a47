package main

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBrowserCommand: dashboard --open hands the address, & and # and
// all, to the OS's opener as one argument, with no shell to read it.
func TestBrowserCommand(t *testing.T) {
	u := "http://127.0.0.1:7717/?a=1&b=2#token=abc&calc.exe"
	cmd := browserCommand(u)
	want := map[string][]string{
		"darwin":  {"open", u},
		"windows": {"rundll32.exe", "url.dll,FileProtocolHandler", u},
	}[runtime.GOOS]
	if want == nil {
		want = []string{"xdg-open", u}
	}
	got := slices.Clone(cmd.Args)
	if runtime.GOOS == "windows" {
		if !filepath.IsAbs(cmd.Path) || !strings.EqualFold(filepath.Base(cmd.Path), "rundll32.exe") {
			t.Errorf("browserCommand runs %s, want the system directory's rundll32.exe", cmd.Path)
		}
		got[0] = strings.ToLower(filepath.Base(got[0]))
	}
	if !slices.Equal(got, want) {
		t.Errorf("browserCommand(%q).Args = %q, want %q", u, cmd.Args, want)
	}
}
