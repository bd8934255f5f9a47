//go:build unix

package store

import (
	"os"
	"path/filepath"
)

// replaceFile renames tmp over path and makes the rename durable. On Unix
// a rename over a file is atomic: a crash leaves one file or the other.
func replaceFile(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}
