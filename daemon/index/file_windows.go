package index

import (
	"fmt"
	"io/fs"
	"os"
	"time"
)

// oDirectory: Windows has no such open flag; openDir checks instead.
const oDirectory = 0

// LinkCount is not written for Windows yet (NumberOfLinks of
// GetFileInformationByHandle): it refuses, so no file is served as a
// single link when it may be a hard link out of the workspace.
func LinkCount(fs.FileInfo) (uint64, error) {
	return 0, fmt.Errorf("counting a file's hard links is %w", errWindows)
}

// idOf is not written for Windows yet (the volume serial and file index):
// a re-created root is not told from the old one.
func idOf(string) fileID { return fileID{} }

// openDir is not written for Windows yet (opening without following a
// reparse point): it refuses, so no directory is walked.
func openDir(name string) (*os.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("reading a directory without following links is %w", errWindows)}
}

// changeTime: Windows keeps no status change time that a rename or a
// new link moves, so every file counts as changed (re-read).
func changeTime(string) (time.Time, bool) { return time.Time{}, false }
