//go:build !race

package flytest

const raceEnabled = false
