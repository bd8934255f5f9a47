//go:build !linux && !windows

package flytest

// flydsOf finds no processes where there is no /proc: the Env's cleanup
// then stops only the flyd that holds its lock.
func flydsOf(string) []int { return nil }

// descendants is not looked for here.
func descendants(int) []string { return nil }

// startHung: only Wine leaves a process start hanging (procs_windows.go).
func startHung([]string) bool { return false }
