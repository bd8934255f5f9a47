package lockfile

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A second holder is refused while the first holds the lock, can read
// what the first wrote, and gets the lock once it is released.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flyd.lock")
	first, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.File().WriteAt([]byte("1234\n"), 0); err != nil {
		t.Fatal(err)
	}
	second, err := TryLock(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock while held = %v, want ErrLocked", err)
	}
	b := make([]byte, 5)
	if n, _ := second.File().ReadAt(b, 0); string(b[:n]) != "1234\n" {
		t.Fatalf("the refused one read %q, want the holder's pid", b[:n])
	}
	second.Unlock()
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	third, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after release = %v", err)
	}
	third.Unlock()
}

// Lock waits for the holder to let go, and gives up when its context ends.
func TestLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "start.lock")
	held, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while held = %v, want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() { // owned by the test: it waits on got
		l, err := Lock(context.Background(), path)
		if err == nil {
			l.Unlock()
		}
		got <- err
	}()
	held.Unlock()
	if err := <-got; err != nil {
		t.Fatalf("Lock after release = %v", err)
	}
}
