// Package mcpserver is flyd's MCP surface, in the manner of gopls's
// server package: every tool, prompt, resource and resource template that
// flyd offers, URI resolution inside a workspace's root, the log
// resources, the search tools, and the registration of the upstreams'
// tools, prompts and resources beside flyd's own. A newcomer finds every
// tool in tools.go and search.go, one method each, all registered in
// addTools; every prompt in prompts.go, registered in addPrompts.
//
// It owns the one mcp.Server that every session connects to, its
// middleware (request logging, panics turned into errors, per-session
// answers) and the notifications of what changed (files, runs, logs),
// sent to exactly the sessions they concern through Session.Notify, which
// never waits on a client.
//
// It does not own sessions, workspaces, transports or listeners: the
// daemon keeps those and hands them in through the Sessions, Session and
// Workspace interfaces. It does not own the runs engine (daemon/runs),
// the index (daemon/index) or the upstream processes (daemon/upstream),
// which it uses. It must not import the daemon or the HTTP API
// (daemon/localapi).
package mcpserver
