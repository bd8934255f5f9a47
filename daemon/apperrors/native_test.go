package apperrors

import (
	"path/filepath"
	"runtime"
	"strings"
)

// The fixtures are what flutter printed on Unix. On Windows the same app
// lives under a drive: native and nativeRoot move a fixture's file URIs
// and its root there (/home/u/app is C:\home\u\app, file:///home/… is
// file:///C:/home/…), so that one fixture tests both.

func native(s string) string {
	if runtime.GOOS != "windows" {
		return s
	}
	return strings.ReplaceAll(s, "file:///", "file:///C:/")
}

func nativeRoot(root string) string {
	if runtime.GOOS != "windows" {
		return root
	}
	return "C:" + filepath.FromSlash(root)
}
