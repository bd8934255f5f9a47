//go:build unix

package fakeflutter

import (
	"os"
	"path/filepath"
)

// install links (or copies) self as dir/flutter.
func install(self, dir string) (string, error) {
	dst := filepath.Join(dir, "flutter")
	if err := os.Symlink(self, dst); err == nil {
		return dst, nil
	}
	return dst, copyFile(self, dst)
}
