//go:build race

package main

// raceEnabled makes the flyd and flyctl binaries under test race-checked too.
const raceEnabled = true
