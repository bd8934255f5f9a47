package fakeflutter

// ignoreSIGPIPE: Windows has no SIGPIPE; a write to a broken pipe is an
// error already.
func ignoreSIGPIPE() {}
