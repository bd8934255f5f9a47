//go:build unix

package main

import "strconv"

// programNames are the file names of the program name: name itself.
func programNames(name string, _ func(string) string) []string { return []string{name} }

// cliRunnable reports whether the program at path can be run with args
// as they are: always, on Unix.
func cliRunnable(string, []string) bool { return true }

// killHint is the command that stops the process pid.
func killHint(pid int) string { return "kill " + strconv.Itoa(pid) }
