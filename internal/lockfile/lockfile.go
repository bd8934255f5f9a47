// Package lockfile holds exclusive locks on files, which the operating
// system drops when the holder exits however it exits: flyd's
// single-instance lock, the shim's start lock, the tests' install lock.
// It owns taking and releasing the lock, not what the file says.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrLocked is returned by TryLock while another process holds the lock.
var ErrLocked = errors.New("the lock is held by another process")

// File is a file this process holds the exclusive lock of. The lock
// covers no byte a reader needs: what the file says (a pid, say) stays
// readable by the processes that find it locked.
type File struct{ f *os.File }

// TryLock opens path (creating it, mode 0600) and takes its lock without
// waiting. While another process holds it, the error wraps ErrLocked and
// the file is still returned, opened, so the caller can read who holds
// it; the caller closes it with Unlock.
func TryLock(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := lock(f); err != nil {
		if errors.Is(err, ErrLocked) {
			return &File{f: f}, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &File{f: f}, nil
}

// Lock takes path's lock, waiting (polling, up to every 100 ms) while
// another process holds it, until ctx is done.
func Lock(ctx context.Context, path string) (*File, error) {
	delay := 5 * time.Millisecond
	for {
		l, err := TryLock(path)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrLocked) {
			return nil, err
		}
		l.f.Close()
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %s: still held by another process: %w", path, ctx.Err())
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// File is the locked file, to write or read what it says.
func (l *File) File() *os.File { return l.f }

// Unlock releases the lock, if this process holds it, and closes the
// file. The file stays: removing it would race with a process that has
// just opened it.
func (l *File) Unlock() error {
	unlock(l.f)
	return l.f.Close()
}
