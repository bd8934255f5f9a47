package runs

import (
	"errors"
	"os"
)

// mapShared is not written for Windows yet (CreateFileMapping and
// MapViewOfFile): without the marks, the engine counts lines lost in a
// crash as "up to", and says so in its log at Open.
func mapShared(f *os.File, size int) ([]byte, error) {
	return nil, errors.New("mapping the seq marks file into memory is not supported on Windows yet")
}

func unmap(mem []byte) error {
	return errors.New("unmapping the seq marks file is not supported on Windows yet")
}
