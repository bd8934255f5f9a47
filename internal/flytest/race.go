//go:build race

package flytest

// raceEnabled makes the binaries under test race-checked too.
const raceEnabled = true
