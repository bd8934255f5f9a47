package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// startupApprovedPath is where Explorer keeps, under HKEY_CURRENT_USER,
// which of the Run key's values the user turned off (Task Manager's
// startup apps, Settings > Apps > Startup): a binary value of the same
// name, whose first byte is odd when it is off.
const startupApprovedPath = `Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run`

// hkcuKey is a registry key under HKEY_CURRENT_USER: the Run key, or in
// tests a scratch key.
type hkcuKey struct {
	path     string // the key, under HKCU
	approved string // the key of its values' StartupApproved flags
}

// newRunKey is the user's Run key.
func newRunKey() runKey { return hkcuKey{path: runKeyPath, approved: startupApprovedPath} }

func (k hkcuKey) get(name string) (string, error) {
	key, err := registry.OpenKey(registry.CURRENT_USER, k.path, registry.QUERY_VALUE)
	if err != nil {
		return "", fmt.Errorf(`open HKCU\%s: %w`, k.path, err)
	}
	defer key.Close()
	v, typ, err := key.GetStringValue(name)
	if err != nil {
		return "", fmt.Errorf(`read HKCU\%s\%s: %w`, k.path, name, err)
	}
	if typ == registry.EXPAND_SZ {
		if v, err = registry.ExpandString(v); err != nil {
			return "", fmt.Errorf(`expand HKCU\%s\%s: %w`, k.path, name, err)
		}
	}
	return v, nil
}

// set writes command as a REG_SZ value: the path is absolute, and no
// environment variable is to be expanded in it.
func (k hkcuKey) set(name, command string) error {
	key, _, err := registry.CreateKey(registry.CURRENT_USER, k.path, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf(`open HKCU\%s: %w`, k.path, err)
	}
	defer key.Close()
	if err := key.SetStringValue(name, command); err != nil {
		return fmt.Errorf(`write HKCU\%s\%s: %w`, k.path, name, err)
	}
	return nil
}

func (k hkcuKey) remove(name string) error {
	key, err := registry.OpenKey(registry.CURRENT_USER, k.path, registry.SET_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf(`open HKCU\%s: %w`, k.path, err)
	}
	defer key.Close()
	if err := key.DeleteValue(name); err != nil && !errors.Is(err, registry.ErrNotExist) {
		return fmt.Errorf(`remove HKCU\%s\%s: %w`, k.path, name, err)
	}
	return nil
}

func (k hkcuKey) disabled(name string) (bool, error) {
	key, err := registry.OpenKey(registry.CURRENT_USER, k.approved, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf(`open HKCU\%s: %w`, k.approved, err)
	}
	defer key.Close()
	b, _, err := key.GetBinaryValue(name)
	switch {
	case errors.Is(err, registry.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf(`read HKCU\%s\%s: %w`, k.approved, name, err)
	}
	return len(b) > 0 && b[0]&1 == 1, nil
}

// endFlyd ends process pid, which the flyd answering on the socket gave
// as its own, once it has made sure that pid is a flyd.exe of this
// user's; and waits until it has ended. It asks flyd to stop through its
// pipe first (POST /v1/shutdown: its runs stop cleanly); only a flyd that
// has not ended within stopGrace is terminated (Windows has no request to
// end that a process without a window receives).
func endFlyd(ctx context.Context, getenv func(string) string, pid int) error {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return nil // it has ended
	}
	if err != nil {
		return fmt.Errorf("stop flyd: open process %d: %w", pid, err)
	}
	// While h is open, Windows gives pid to no other process: what is
	// checked here is what is ended.
	defer windows.CloseHandle(h)
	image, err := imageName(h)
	if err != nil {
		return fmt.Errorf("stop flyd: process %d: %w", pid, err)
	}
	if !strings.EqualFold(filepath.Base(image), flydExe) {
		return fmt.Errorf("stop flyd: the pid flyd's socket gave, %d, is %s, not flyd; not ending it", pid, image)
	}
	if !owner.Current().Runs(pid) {
		return fmt.Errorf("stop flyd: process %d (%s) is not yours; not ending it", pid, image)
	}
	if lc, err := newClient(getenv); err == nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, serr := lc.Shutdown(sctx)
		cancel()
		lc.CloseIdleConnections()
		if serr == nil {
			if ev, err := windows.WaitForSingleObject(h, uint32(stopGrace.Milliseconds())); err == nil && ev == windows.WAIT_OBJECT_0 {
				return nil
			}
		}
	}
	if err := proc.SignalProcess(pid, proc.Terminate); err != nil {
		return fmt.Errorf("stop flyd: %w", err)
	}
	for {
		ev, err := windows.WaitForSingleObject(h, 100)
		switch {
		case err != nil:
			return fmt.Errorf("stop flyd: wait for process %d: %w", pid, err)
		case ev == windows.WAIT_OBJECT_0:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("stop flyd: process %d has not ended: %w", pid, ctx.Err())
		}
	}
}

// stopGrace is how long a flyd asked to stop may take before it is
// terminated: its runs' own grace, and then some.
const stopGrace = 30 * time.Second

// imageName is the path of the program process h runs.
func imageName(h windows.Handle) (string, error) {
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n := uint32(len(buf))
	if err := windows.QueryFullProcessImageName(h, 0, &buf[0], &n); err != nil {
		return "", fmt.Errorf("read its program's path: %w", err)
	}
	return windows.UTF16ToString(buf[:n]), nil
}
