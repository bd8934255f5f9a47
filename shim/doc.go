// Package shim is the stdio side of "flyctl mcp": it relays an editor's
// newline-delimited JSON-RPC stream to flyd's WebSocket endpoint and
// back, over the Unix socket (a named pipe on Windows, dialed through
// internal/ipc). When no flyd answers it starts one (through a
// hook for the service manager, else detached), under a lock file so that
// shims starting together start one. When flyd goes away mid-session it
// reconnects and replays the client's initialize and subscriptions, so
// the editor never has to restart its MCP server.
//
// It does not speak MCP beyond the few messages a reconnect replays, and
// knows nothing of service managers: the caller passes a Start function.
// It imports only the standard library, coder/websocket and fly's
// internal ipc, lockfile, logkey, owner, paths, proc and wire packages;
// never the MCP SDK, bbolt or daemon.
//
// Its files by concern: relay.go (Config, New, Run: the lifecycle),
// session.go (one connection's session: replay, relay, drain), input.go
// (reading stdin), forward.go (messages both ways), stdout.go (the one
// writer of Stdout), inflight.go (the requests in flight), replay.go and
// reconnect.go (what a reconnect gives back), dial.go (dialing and
// starting flyd), line.go and scan.go (reading JSON-RPC lines), stdio.go
// and the per-OS stdio_*.go (Pollable), and lock.go (the start lock).
package shim
