// Package shim is the stdio side of "flyctl mcp": it relays an editor's
// newline-delimited JSON-RPC stream to flyd's WebSocket endpoint on the
// Unix socket and back. When no flyd answers it starts one (through a
// hook for the service manager, else detached), under a lock file so that
// shims starting together start one. When flyd goes away mid-session it
// reconnects and replays the client's initialize and subscriptions, so
// the editor never has to restart its MCP server.
//
// It does not speak MCP beyond the few messages a reconnect replays, and
// knows nothing of service managers: the caller passes a Start function.
// It imports only the standard library, coder/websocket and fly's
// internal path and wire packages; never the MCP SDK, bbolt or daemon.
package shim
