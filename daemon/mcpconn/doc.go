// Package mcpconn holds the connections flyd serves MCP sessions on, and
// the rule they share: a client that does not read costs its own session
// only. Every write goes through a bounded outbox (daemon/outbox) that one
// writer goroutine per connection drains under a deadline; a notification
// never waits, and a client that lets its outbox fill is dropped.
//
//   - WebSocket is an mcp.Connection over one coder/websocket connection
//     (the shim's socket and the loopback listener), with one JSON-RPC
//     message per text frame and large read results spliced in unencoded.
//   - Queued puts the same outbox in front of any other mcp.Connection
//     (the go-sdk's Streamable HTTP, in-memory in tests).
//   - BoundInitialize and BoundInitializeMessage bound what a client says
//     of itself before the SDK keeps it.
//   - ParseStateless checks a MCP 2026-07-28 POST as its transport requires
//     (headers, _meta, the methods that era dropped) before any session is
//     looked for, and WithSDKVersion marks it for the SDK's stateless
//     transport.
//   - CheckBatch refuses a JSON-RPC batch where the session's negotiated
//     revision has none, and bounds one where it has.
//
// It lives apart from the daemon because it is transport plumbing with its
// own tests and no knowledge of sessions, workspaces or tools: the daemon
// owns the sessions that use these connections, and daemon/mcpserver what
// is said on them.
package mcpconn

// Notifier sends a server notification to exactly one client, without
// waiting on a slow one. The go-sdk can only notify every subscriber of a
// URI, and workspace URIs are relative, so the same URI names different
// files in different workspaces: flyd routes its notifications itself.
type Notifier interface {
	Notify(method string, params any) error
}

// Splicer is a connection that can write a large text of a result without
// the SDK encoding it (see WebSocket.Stash): a handler puts the
// placeholder Stash returns in its result instead of the text.
type Splicer interface {
	Stash(text string) (placeholder string)
}
