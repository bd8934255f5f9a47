// Package localapi is flyd's local HTTP API, in the manner of Tailscale's
// localapi: the handlers of /v1/* (status, runs, run logs and follows,
// events, grep, the token, upstream restarts) and the dashboard's static
// files. flyctl and the dashboard read the same routes.
//
// It owns the handlers, their error answers, the NDJSON log streams (with
// their write deadlines, heartbeats and shared encoded lines) and the
// status change broadcast that event streams wait on. It is given the runs
// engine and, as functions in Config, what only the daemon knows: the
// status document, the workspaces, the upstreams, the token and who is
// calling. It does not own the listeners, their guard (daemon/loopback),
// MCP (daemon/mcpserver, which it must not import) or the daemon's
// sessions. Handlers run concurrently; nothing here blocks a producer.
package localapi
