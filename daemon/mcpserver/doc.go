// Package mcpserver is flyd's MCP surface, in the manner of gopls's
// server package: every tool, prompt, resource and resource template that
// flyd offers, URI resolution inside a workspace's root, the log
// resources, the search tools, and the registration of the upstreams'
// tools, prompts and resources beside flyd's own. A newcomer finds every
// tool listed, with its tags, in catalog.go (addTools registers them all),
// and each tool as one method of tools, in the file of its job: tools.go
// (run, build, devices, doctor, create, the runs list, logs), runtools.go
// (reload, restart, stop, claim, attach), errors.go, inspect.go,
// search.go (find, grep), and merged.go (the tools that choose among
// others by a field, and files_read). Every prompt is in prompts.go,
// registered in addPrompts; the resources and templates are registered in
// server.go and read in resources.go.
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
