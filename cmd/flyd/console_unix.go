//go:build unix

package main

import "os"

// envUsage is the environment part of flyd's usage.
const envUsage = `  FLY_SOCKET      socket path (default $XDG_RUNTIME_DIR/fly/flyd.sock, else /tmp/fly-<uid>/flyd.sock)
  FLY_STATE_DIR   state directory (default $XDG_STATE_HOME/fly, else ~/.local/state/fly)
`

// detachConsole: a Unix process has no console window to close. Its
// stderr is left as it is (the log gets flyd's logger).
func detachConsole(*os.File) error { return nil }
