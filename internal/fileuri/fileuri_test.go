package fileuri

import (
	"runtime"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	paths := []string{"/home/u/app/lib/main.dart", "/tmp/a b/c#d%e.dart"}
	if runtime.GOOS == "windows" {
		paths = []string{`C:\Users\u\app\lib\main.dart`, `D:\a b\c#d%e.dart`, `\\server\share\app\x.dart`}
	}
	for _, p := range paths {
		uri := FromPath(p)
		got, ok := ToPath(uri)
		if !ok || got != p {
			t.Errorf("ToPath(FromPath(%q) = %q) = %q, %v", p, uri, got, ok)
		}
	}
}

func TestForms(t *testing.T) {
	unix := map[string]string{
		"file:///home/u/x.dart":          "/home/u/x.dart",
		"file://localhost/home/u/x.dart": "/home/u/x.dart",
		"file:///C:/Users/u/x.dart":      "/C:/Users/u/x.dart", // a legal Unix path
		"file://server/share/x.dart":     "",
	}
	windows := map[string]string{
		"file:///home/u/x.dart":      "", // no drive: no path here
		"file:///C:/Users/u/x.dart":  `C:\Users\u\x.dart`,
		"file:///c:/Users/u/x.dart":  `C:\Users\u\x.dart`,
		"file://server/share/x.dart": `\\server\share\x.dart`,
	}
	cases := unix
	if runtime.GOOS == "windows" {
		cases = windows
	}
	for _, bad := range []string{"package:app/x.dart", "http://x/y", "file://", "%zz"} {
		cases[bad] = ""
	}
	for uri, want := range cases {
		got, ok := ToPath(uri)
		if got != want || ok != (want != "") {
			t.Errorf("ToPath(%q) = %q, %v; want %q", uri, got, ok, want)
		}
	}
	if got := FromPath(`C:\Users\u\x.dart`); runtime.GOOS == "windows" && got != "file:///C:/Users/u/x.dart" {
		t.Errorf("FromPath(a drive path) = %s", got)
	}
}
