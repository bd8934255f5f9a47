//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// exeSuffix ends the name of a program file: nothing on Unix.
const exeSuffix = ""

// checkExecutable reports whether path is a regular file someone may run.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// samePath reports whether a and b name the same file by name.
func samePath(a, b string) bool { return filepath.Clean(a) == filepath.Clean(b) }
