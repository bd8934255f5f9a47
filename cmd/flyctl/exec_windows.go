package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// exeSuffix ends the name of a program file: flyd.exe, flyctl.exe.
const exeSuffix = ".exe"

// checkExecutable reports whether path is a regular file Windows runs as
// a program. Windows has no execute bit: what it runs is a file whose
// extension is one of PATHEXT's (read as exec.LookPath reads it).
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	}
	exts := pathExts(os.Getenv("PATHEXT"))
	if !slices.Contains(exts, strings.ToLower(filepath.Ext(path))) {
		return fmt.Errorf("%s is not executable: Windows runs files ending in %s", path, strings.Join(exts, ", "))
	}
	return nil
}

// pathExts are the extensions, lower case, of the PATHEXT value v, or
// Windows's defaults when it is empty.
func pathExts(v string) []string {
	var exts []string
	for _, e := range strings.Split(strings.ToLower(v), ";") {
		if e = strings.TrimSpace(e); strings.HasPrefix(e, ".") {
			exts = append(exts, e)
		}
	}
	if exts == nil {
		exts = []string{".com", ".exe", ".bat", ".cmd"}
	}
	return exts
}

// samePath reports whether a and b name the same file by name: Windows
// file names are case-insensitive.
func samePath(a, b string) bool { return strings.EqualFold(filepath.Clean(a), filepath.Clean(b)) }
