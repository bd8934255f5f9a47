//go:build race

package daemon

// raceEnabled makes the binaries under test race-checked too.
const raceEnabled = true
