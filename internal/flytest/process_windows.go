package flytest

import "os"

// Exists reports whether process pid exists: FindProcess opens it.
func Exists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
