package runs

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapShared maps the first size bytes of f into memory, shared: what is
// stored there is in the system's cache of the file, which reaches the
// disk even if this process dies (as a MAP_SHARED mapping does on Unix,
// which does not msync either).
func mapShared(f *os.File, size int) ([]byte, error) {
	m, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READWRITE, 0, uint32(size), nil)
	if err != nil {
		return nil, fmt.Errorf("create file mapping: %w", err)
	}
	defer windows.CloseHandle(m) // the view keeps the mapping
	addr, err := windows.MapViewOfFile(m, windows.FILE_MAP_WRITE, 0, 0, uintptr(size))
	if err != nil {
		return nil, fmt.Errorf("map view of file: %w", err)
	}
	// The view is not Go memory: its address comes as a number.
	return unsafe.Slice((*byte)(unsafe.Add(nil, addr)), size), nil
}

func unmap(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	return windows.UnmapViewOfFile(uintptr(unsafe.Pointer(&mem[0])))
}
