// Package fileuri converts between a file's path on this machine and its
// file:// URI, as Dart and MCP clients write them: file:///home/u/x.dart
// on Unix, file:///C:/Users/u/x.dart for a drive and file://server/share/x
// for a UNC path on Windows. Every place that reads or writes such a URI
// goes through it, so no caller splits a drive letter or a slash by hand.
// It imports only the standard library.
package fileuri

import (
	"net/url"
	"path/filepath"
	"strings"
)

// FromPath is the file:// URI of the absolute path p.
func FromPath(p string) string {
	s := filepath.ToSlash(p)
	if host, rest, ok := uncParts(s); ok {
		return (&url.URL{Scheme: "file", Host: host, Path: rest}).String()
	}
	if !strings.HasPrefix(s, "/") {
		s = "/" + s // a drive: /C:/x
	}
	return (&url.URL{Scheme: "file", Path: s}).String()
}

// ToPath is the path on this machine of a file:// URI, and whether uri is
// one: its host must be empty or "localhost", unless it names a UNC share
// (Windows).
func ToPath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", false
	}
	return toPath(u.Host, u.Path)
}

// uncParts splits a slashed UNC path //server/share/x into its host and
// the rest.
func uncParts(s string) (host, rest string, ok bool) {
	if !strings.HasPrefix(s, "//") || strings.HasPrefix(s, "///") {
		return "", "", false
	}
	host, rest, _ = strings.Cut(s[2:], "/")
	return host, "/" + rest, host != ""
}
