package fakeflutter

import (
	"fmt"
	"os"
	"path/filepath"
)

// WindowsExe is the fake's program on Windows, beside the flutter.bat
// that runs it.
const WindowsExe = "flutter-fake.exe"

// install copies self as dir/flutter-fake.exe and writes dir/flutter.bat,
// which runs it with its arguments: flutter is a batch file on Windows,
// and fly must find and run it as one.
func install(self, dir string) (string, error) {
	exe := filepath.Join(dir, WindowsExe)
	if err := copyFile(self, exe); err != nil {
		return "", err
	}
	bat := filepath.Join(dir, "flutter.bat")
	script := "@echo off\r\n\"%~dp0" + WindowsExe + "\" %*\r\n"
	if err := os.WriteFile(bat, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("install fake flutter: %w", err)
	}
	return bat, nil
}
