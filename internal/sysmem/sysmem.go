// Package sysmem reads how much physical memory the machine has, for
// defaults that adapt to it (flyd's grep cache).
package sysmem

// Total is the machine's physical memory in bytes; 0 when it cannot be
// read.
func Total() uint64 { return total() }
