// Package daemon is flyd: one per-user server that every MCP client
// shares. It owns the sessions, the MCP handlers (one mcp.Server, one
// Connect per client connection), the shared workspace indexes, and the
// HTTP routes on the Unix socket. Server.Run blocks until its context is
// cancelled.
//
// It does not own paths (internal/paths), flags or signals (cmd/flyd), or
// the client side of the socket (shim).
package daemon
