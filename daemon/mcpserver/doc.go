// Package mcpserver is flyd's MCP surface, in the manner of gopls's
// server package: every tool, prompt, resource and resource template that
// flyd offers, URI resolution inside a workspace's root, the log
// resources, the search tools, and the upstreams' tools, prompts and
// resources served beside flyd's own.
//
// A tool is written in two places. Its name and tags (category and
// presets) are in internal/toolfilter's catalog.go (toolfilter.Tools),
// which filters and help texts read too. Its description, annotations
// and handler are in this package's catalog.go, whose addTools registers
// every tool. A tool missing from toolfilter's catalog makes add panic,
// and TestToolCatalog fails when tools/list and that catalog differ. Old
// names of merged tools are registered with alias and take the tags of
// the tool they became.
//
// Its files by concern:
//   - server.go: Config; the Sessions, Session and Workspace interfaces;
//     New, which registers the resources and templates and calls addTools
//     and addPrompts; the middleware (request logging, panics turned into
//     errors, cache hints, per-session answers); the fixed fly://
//     resources and the instructions.
//   - catalog.go: addTools, add, alias, and the session's tool filter
//     applied to tools/list and tools/call.
//   - tools.go: flutter_run, flutter_build, logs_read, and the devices,
//     doctor and create handlers behind flutter_sdk.
//   - runtools.go: hot reload and restart, stop, claim, attach, and the
//     news of what other sessions did to a run.
//   - runslist.go: runs_list.
//   - errors.go: flutter_errors and the fly://runs/{id}/errors resource.
//   - inspect.go: the widget tree and screenshot handlers.
//   - merged.go: flutter_inspect and flutter_sdk, which choose among
//     other handlers by a field, and files_read.
//   - search.go: files_find, files_grep and completion/complete.
//   - pick.go: which run a tool works on when run_id is left out or
//     shortened.
//   - prompts.go: every prompt, registered in addPrompts.
//   - upstreams.go: addPrompt, and the upstreams' tools, prompts and
//     resources proxied beside flyd's own.
//   - resources.go: resources/list, reads of workspace:/// files and the
//     fixed fly:// resources, subscriptions, and WorkspaceChanged.
//   - logs.go: reads of logs:// resources, their listing, and RunChanged.
//   - modules.go: fly://project/overview as markdown and reads of
//     fly://module/{name}.
//   - resolve.go: workspace URIs, byte ranges, and what a path may serve.
//   - listen.go: subscriptions/listen streams of 2026-07-28 clients.
//   - cache.go: the caching hints on results.
//
// Resources and templates are registered in server.go and read in
// resources.go (workspace files, fixed fly:// resources), logs.go
// (logs://), modules.go (fly://module/{name}, the overview's markdown)
// and errors.go (fly://runs/{id}/errors).
//
// It owns the one mcp.Server that every session connects to, its
// middleware and the notifications of what changed (files, runs, logs,
// errors), sent to exactly the sessions they concern through
// Session.Notify, which never waits on a client.
//
// It does not own sessions, workspaces, transports or listeners: the
// daemon keeps those and hands them in through the Sessions, Session and
// Workspace interfaces. It does not own the runs engine (daemon/runs),
// the index (daemon/index) or the upstream processes (daemon/upstream),
// which it uses. It must not import the daemon, the HTTP API
// (daemon/localapi) or the loopback guard (daemon/loopback).
package mcpserver
