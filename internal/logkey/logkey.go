// Package logkey names the attributes that several of fly's packages
// write into their structured logs (flyd's and the shim's), so that one
// fact is found under one key whoever logged it. It owns the names, not
// the logging.
package logkey

// Error is the key of an error's text.
const Error = "error"
