// Package shim is the stdio side of "flyctl mcp": it relays an editor's
// newline-delimited JSON-RPC stream to flyd's WebSocket endpoint on the
// Unix socket and back, starting flyd when none answers.
//
// It imports only the standard library, coder/websocket and fly's
// internal path and wire packages; never the MCP SDK, bbolt or daemon.
package shim
