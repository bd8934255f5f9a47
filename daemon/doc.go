// Package daemon is flyd: one per-user server that every MCP client
// shares. It owns the server's lifetime (Server.Run blocks until its
// context is cancelled), the listeners (the Unix socket with its peer
// check, and the loopback TCP listener), the sessions (one per client
// connection: the shim's WebSocket, Streamable HTTP, or any transport
// handed to ServeTransport) and the workspaces they share, and it wires
// its parts together:
//
//   - daemon/mcpserver answers MCP: tools, prompts, resources;
//   - daemon/localapi answers /v1/* and serves the dashboard;
//   - daemon/mcpconn is the connection a session is served on;
//   - daemon/loopback guards the TCP listener;
//   - daemon/runs, daemon/index, daemon/upstream and daemon/overview do
//     the work.
//
// Streamable HTTP stays here: a session over it is created, bound to a
// workspace, evicted and reaped by the daemon's session table, and the
// rest of it is the go-sdk's transport.
//
// It does not own paths (internal/paths), flags or signals (cmd/flyd), or
// the client side of the socket (shim). Its end-to-end tests, which use
// only what it exports, are in daemon/e2e.
package daemon
