package dtd

import "path/filepath"

// dartStateDir is Dart's state directory: %LOCALAPPDATA%\Dart.
func dartStateDir(getenv func(string) string) string {
	return filepath.Join(getenv("LOCALAPPDATA"), "Dart")
}
