//go:build !race

package flytest

// Race says the binaries under test are race-checked too (their memory
// is then several times a plain build's).
const Race = false
