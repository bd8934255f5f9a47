//go:build unix

package holder

import "path/filepath"

func controlOf(dir string) string { return filepath.Join(dir, "control") }
