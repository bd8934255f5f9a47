package dtd

import "path/filepath"

// dartStateDir is Dart's state directory: ~/Library/Application Support/Dart.
func dartStateDir(getenv func(string) string) string {
	return filepath.Join(getenv("HOME"), "Library", "Application Support", "Dart")
}
