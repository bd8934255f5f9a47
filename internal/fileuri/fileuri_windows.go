package fileuri

import (
	"path/filepath"
	"strings"
)

// toPath: /C:/x is C:\x; a host names a UNC share, \\host\x.
func toPath(host, path string) (string, bool) {
	if host != "" && host != "localhost" {
		return `\\` + host + filepath.FromSlash(path), true
	}
	if len(path) >= 3 && path[0] == '/' && path[2] == ':' && isLetter(path[1]) {
		path = path[1:]
	}
	if len(path) < 2 || path[1] != ':' {
		return "", false // no drive: not a path on this machine
	}
	return filepath.FromSlash(strings.ToUpper(path[:1]) + path[1:]), true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
