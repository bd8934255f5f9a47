package dtd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/fly-dev/fly/daemon/vmservice"
	"github.com/fly-dev/fly/internal/owner"
)

// Dir is the directory DTDs write their files to: $DART_DATA_HOME/dtd,
// else the per-OS state directory (cli_util's BaseDirectories('Dart')).
func Dir(getenv func(string) string) string {
	if d := getenv("DART_DATA_HOME"); d != "" {
		return filepath.Join(d, "dtd")
	}
	return filepath.Join(dartStateDir(getenv), "dtd")
}

// Info is one DTD's file.
type Info struct {
	WSURI         string `json:"wsUri"`
	Epoch         int64  `json:"epoch"`
	PID           int    `json:"pid"`
	DartVersion   string `json:"dartVersion"`
	WorkspaceRoot string `json:"workspaceRoot"`
	IDEName       string `json:"ideName"`
}

// maxFile bounds a DTD file: they are a few hundred bytes.
const maxFile = 16 << 10

// Why a file is not read.
var (
	ErrNotRegular = errors.New("not a regular file (a symlink?)")
	ErrNotOwned   = errors.New("not owned by this user")
	ErrStale      = errors.New("its process is gone, or is not this user's")
)

// Read reads the file name of dir (opened as an os.Root) as a DTD's:
// a regular file owned by user, never followed through a symlink, at most
// 16 KB, naming a loopback URI and a live process of user's (a pid of
// another user's, reused after the DTD died, leads nowhere).
func Read(dir *os.Root, name string, user owner.User) (Info, error) {
	if _, err := strconv.Atoi(name); err != nil {
		return Info{}, fmt.Errorf("%q is not a DTD file: its name is not a pid", name)
	}
	fi, err := dir.Lstat(name)
	if err != nil {
		return Info{}, err
	}
	if !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|oNoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(st, fi) {
		return Info{}, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	// By its full path: on Windows the owner is read by path (st alone
	// does not say it). The directory is the user's, and no one else may
	// write it (private), so nobody can swap the file in between.
	if mine, err := user.Owns(filepath.Join(dir.Name(), name), st); err != nil || !mine {
		return Info{}, fmt.Errorf("%s: %w", name, ErrNotOwned)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return Info{}, err
	}
	if len(b) > maxFile {
		return Info{}, fmt.Errorf("%s: larger than %d bytes", name, maxFile)
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return Info{}, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := vmservice.WebSocketURI(in.WSURI); err != nil {
		return Info{}, fmt.Errorf("%s: %w", name, err)
	}
	if in.WorkspaceRoot == "" || !filepath.IsAbs(in.WorkspaceRoot) || len(in.WorkspaceRoot) > 4096 {
		return Info{}, fmt.Errorf("%s: workspaceRoot %.100q is not an absolute path", name, in.WorkspaceRoot)
	}
	if in.PID <= 0 || !user.Runs(in.PID) {
		return Info{}, fmt.Errorf("%s: %w", name, ErrStale)
	}
	in.IDEName = bound(in.IDEName, 64)
	in.DartVersion = bound(in.DartVersion, 128)
	return in, nil
}

func bound(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return string([]rune(s)) // invalid UTF-8 replaced
}
