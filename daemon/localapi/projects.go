package localapi

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// What the dashboard shows as a run's app is its project's name: the
// name: of the pubspec.yaml at the run's root, read when the runs are
// listed. A root is the user's own project, but what it holds is bounded
// all the same: a regular file, its first pubspecPeek bytes, a name of
// a Dart package's characters; at most maxProjects roots a listing.
const (
	pubspecPeek   = 16 << 10
	maxProjects   = 64
	maxNameLength = 64
)

// projectNames returns the project name of each distinct root of runs
// that has one, keyed by root.
func projectNames(roots []string) map[string]string {
	names := make(map[string]string)
	seen := make(map[string]bool)
	for _, root := range roots {
		if seen[root] || len(seen) >= maxProjects {
			continue
		}
		seen[root] = true
		if name := projectName(root); name != "" {
			names[root] = name
		}
	}
	return names
}

// projectName is the name in the pubspec.yaml at root, or "" when it has
// none (or no pubspec.yaml).
func projectName(root string) string {
	if root == "" || !filepath.IsAbs(root) {
		return ""
	}
	// Opened without waiting (a FIFO put there would wait for a writer,
	// and one swapped in after a stat too), then checked as opened.
	f, err := os.OpenFile(filepath.Join(root, "pubspec.yaml"), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, pubspecPeek))
	if err != nil {
		return ""
	}
	if len(b) == pubspecPeek { // the last line may be cut: leave it out
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	return pubspecName(b)
}

// pubspecName finds the top-level name: in the text of a pubspec.yaml, as
// pub spells it (a Dart identifier: letters, digits, underscores), bare
// or quoted, a comment after it allowed; "" when there is none.
func pubspecName(b []byte) string {
	text := strings.TrimPrefix(string(b), "\ufeff")
	for line := range strings.Lines(text) {
		v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "name:")
		if !ok {
			continue
		}
		if i := strings.IndexAny(v, "#"); i == 0 || i > 0 && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = v[:i] // a comment
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if !packageName(v) {
			return ""
		}
		return v
	}
	return ""
}

// packageName reports whether s may be a Dart package's name.
func packageName(s string) bool {
	if s == "" || len(s) > maxNameLength || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
